"""The store contract (any backend: the `store` fixture is parametrised), and the durable
session API on top of it."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3

import pytest

from conftest import assert_history_valid, call, drive, scripted
from loopwright import Agent, Approval, Rules, SessionBusy, tool
from loopwright import events as ev
from loopwright.errors import UnknownPending, UnknownSession
from loopwright.messages import UserMessage
from loopwright.store import StaleWriter, StoreError, open_store
from loopwright.store.durable import (
    OWNER,
    export_jsonl,
    export_traces,
    open_session,
    read_jsonl,
    resolve,
)
from loopwright.store.sqlite import SQLiteStore
from loopwright.testing import FunctionModel


@pytest.fixture(params=["sqlite"])
def store(request, tmp_path):
    backend = open_store(tmp_path / "loopwright.db")
    yield backend
    backend.close()


def dead_owner() -> str:
    from loopwright.store.sqlite import process_identity

    return process_identity(999_999_999)  # no such process


def test_owners_die_with_their_process_and_with_a_reboot():
    import socket

    from loopwright.store.sqlite import _alive, _boot_id

    assert _alive(OWNER)
    assert not _alive(dead_owner())
    assert not _alive(f"{socket.gethostname()}:another-boot:1:1")  # the machine restarted
    pid_reused = OWNER.rsplit(":", 1)[0] + ":12345"  # same pid, another start time
    assert not _alive(pid_reused)
    assert _alive(f"other-machine:{_boot_id()}:1:1")


def test_appends_get_gapless_sequence_numbers_and_load_round_trips(store):
    claim, died = store.claim("s", "t", "a", OWNER)
    assert (claim.epoch, died) == (1, False)
    events = [
        ev.Session(session_id="s"),
        ev.InputReceived(message=UserMessage(content="hi")),
        ev.LoopDone(text="x"),
        ev.Done(text="x", stop_reason="completed"),
    ]
    assert store.append(claim, events[:1]) == 1
    assert store.append(claim, events[1:]) == 4
    loaded = store.load("s", "t")
    assert [(e.seq, e.event) for e in loaded] == list(enumerate(events, start=1))
    assert [e.event for e in store.load("s", "t", after=2)] == events[2:]
    store.release(claim, "idle")
    assert store.session("s", "t").status == "idle"


def test_a_live_claim_makes_the_session_busy_and_a_dead_one_is_taken_over(store):
    store.claim("s", "t", "a", OWNER)
    with pytest.raises(SessionBusy):
        store.claim("s", "t", "a", OWNER + "-other")
    other = open_store(store.path)
    old, _ = other.claim("s2", "t", "a", dead_owner())
    assert store.session("s2", "t").status == "interrupted"
    new, died = store.claim("s2", "t", "a", OWNER)
    assert died and new.epoch == old.epoch + 1
    with pytest.raises(StaleWriter):
        other.append(old, [ev.Session(session_id="s2")])  # fenced out
    assert store.append(new, [ev.Session(session_id="s2")]) == 1
    other.close()


def test_other_tenants_ids_are_unknown(store):
    claim, _ = store.claim("s", "acme", "a", OWNER)
    store.append(claim, [ev.Session(session_id="s")])
    with pytest.raises(UnknownSession):
        store.load("s", "globex")
    with pytest.raises(UnknownSession):
        store.claim("s", "globex", "a", OWNER)
    with pytest.raises(UnknownPending):
        store.pending_item("apr_nope", "acme")
    assert store.sessions("globex") == []


def test_corrupt_foreign_and_newer_databases_are_refused(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable loopwright database"):
        SQLiteStore(garbage)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreError, match="belongs to another application"):
        SQLiteStore(foreign)
    newer = tmp_path / "newer.db"
    SQLiteStore(newer).close()
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(StoreError, match="schema version 99 is newer"):
        SQLiteStore(newer)


def test_a_full_database_fails_clearly_and_loses_nothing_committed(tmp_path):
    store = SQLiteStore(tmp_path / "full.db", max_page_count=40)
    claim, _ = store.claim("s", "t", "a", OWNER)
    big = ev.LoopDone(text="x" * 3000)
    committed = 0
    with pytest.raises(StoreError, match="full"):
        for _ in range(200):
            committed = store.append(claim, [big])
    loaded = store.load("s", "t")
    assert [e.seq for e in loaded] == list(range(1, committed + 1))


def test_a_locked_database_fails_clearly(tmp_path):
    store = SQLiteStore(tmp_path / "locked.db", busy_timeout=0.05)
    blocker = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="locked"):
        store.claim("s", "t", "a", OWNER)
    blocker.execute("ROLLBACK")
    assert store.claim("s", "t", "a", OWNER)[0].epoch == 1


RULES = Rules.from_yaml(
    "rules: [{name: ask-pay, tool: pay, decision: ask}]\ndefault_decision: allow"
)
executed: list[str] = []


@tool
def look(n: int) -> str:
    """Look."""
    executed.append(f"look {n}")
    return f"looked {n}"


@tool
def pay(n: int) -> str:
    """Pay."""
    executed.append(f"pay {n}")
    return f"paid {n}"


def agent(*replies, **kw):
    executed.clear()
    return Agent(name="payer", model=scripted(*replies), tools=[look, pay], rules=RULES, **kw)


async def test_the_log_is_the_history_the_stream_and_the_usage(store):
    a = agent(
        {"tool_calls": [call("look", "l", n=1)], "usage": {"input_tokens": 9, "output_tokens": 3}},
        {"text": "done", "usage": {"input_tokens": 12, "output_tokens": 1, "cost": 0.002}},
    )
    session = await open_session(a, store, "s", tenant="acme")
    result = await drive(session.run("hello"))
    stored = [e.event for e in store.load("s", "acme")]
    assert stored == [e for e in result.events if not e.type.endswith(":delta")]
    again = await open_session(a, store, "s", tenant="acme")
    assert again.messages == session.messages
    assert_history_valid(again.messages)
    usage = store.usage_totals("acme")
    assert (usage["requests"], usage["input_tokens"], usage["output_tokens"]) == (2, 21, 4)
    assert usage["cost"] == 0.002
    assert store.session("s", "acme").status == "idle"


async def test_a_paused_run_is_resolved_and_resumed_through_the_store(store):
    a = agent(
        {"tool_calls": [call("pay", "p1", n=1), call("look", "l", n=2), call("pay", "p2", n=3)]},
        "all paid",
    )
    session = await open_session(a, store, "s")
    result = await drive(session.run("go"))
    assert result.stop_reason == "paused" and executed == ["look 2"]
    assert store.session("s", "default").status == "paused"
    first, second = store.pending("default", agent="payer")
    assert (first.call_id, second.call_id, first.status) == ("p1", "p2", "open")
    bad = await resolve(store, a, first.id, Approval.approve(args={"n": "lots"}))
    assert (bad.status, bad.outstanding) == ("invalid", 2)
    ok = await resolve(store, a, first.id, Approval.approve(args={"n": 10}, by="ana"))
    assert (ok.status, ok.outstanding) == ("resolved", 1)
    assert (await resolve(store, a, first.id, Approval.deny())).status == "already_resolved"
    with pytest.raises(UnknownPending):
        await resolve(store, a, second.id, Approval.approve(), tenant="intruder")
    await resolve(store, a, second.id, Approval.approve(by="bo"))
    decided = store.pending_item(first.id, "default")
    assert (decided.status, decided.decided_by, decided.edited_args) == (
        "approved",
        "ana",
        {"n": 10},
    )
    assert decided.decided_at is not None
    later = await open_session(a, store, "s")  # as another process would
    resumed = await drive(later.resume())
    assert resumed.text == "all paid" and executed == ["look 2", "pay 10", "pay 3"]
    assert_history_valid(later.messages)
    assert store.pending("default") == []


async def test_a_denial_closes_the_batch_and_skips_the_rest(store):
    a = agent({"tool_calls": [call("pay", "p1", n=1), call("pay", "p2", n=2)]}, "unused")
    session = await open_session(a, store, "s")
    await drive(session.run("go"))
    first, second = store.pending("default")
    assert (await resolve(store, a, first.id, Approval.deny("no"))).outstanding == 0
    assert store.pending_item(second.id, "default").status == "skipped"
    assert (await resolve(store, a, second.id, Approval.approve())).status == "already_resolved"
    resumed = await drive((await open_session(a, store, "s")).resume())
    assert resumed.stop_reason == "denied" and executed == []


async def test_two_runs_on_one_session_exactly_one_proceeds(store):
    refused = asyncio.Event()

    async def answer(request):  # the first run holds its claim until the second was refused
        await refused.wait()
        return "first"

    a = Agent(name="payer", model=FunctionModel(answer), tools=[look, pay], rules=RULES)
    first = await open_session(a, store, "s")
    second = await open_session(a, store, "s")
    run = first.run("one")
    await run.__anext__()
    with pytest.raises(SessionBusy):
        await second.run("two").result()
    refused.set()
    result = await run.result()
    assert (result.stop_reason, result.text) == ("completed", "first")


async def test_export_round_trips_and_traces_hold_the_context(store, tmp_path):
    a = agent({"tool_calls": [call("look", "l", n=1)]}, "done")
    session = await open_session(a, store, "s")
    await drive(session.run("hi"))
    out = io.StringIO()
    count = export_jsonl(store, "s", out)
    lines = out.getvalue().splitlines()
    assert count == len(lines) == len(store.load("s", "default"))
    assert json.loads(lines[0])["event"] == {"type": "session", "sessionId": "s"}
    assert read_jsonl(iter(lines)) == store.load("s", "default")
    [trace] = export_traces(store, a, "s", tmp_path / "traces")
    assert [m["role"] for m in json.loads(trace.read_text())] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_open_store_uses_loopwright_home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPWRIGHT_HOME", str(tmp_path / "home"))
    store = open_store()
    assert store.path == tmp_path / "home" / "loopwright.db"
    store.close()
    monkeypatch.delenv("LOOPWRIGHT_HOME")
    monkeypatch.chdir(tmp_path)
    store = open_store()
    assert store.path.resolve() == (tmp_path / ".loopwright" / "loopwright.db").resolve()
    store.close()


async def test_crash_mid_reply_leaves_carry_over(store):
    a = agent({"text": "a long reply that never finishes", "chunk": 4, "delay": 0.01})
    session = await open_session(a, store, "s")
    session.journal.partial_every = 0.0
    claim_owner = []

    async for event in session.run("tell me"):
        if event.type == "text:delta":
            claim_owner.append(event.delta)
            if len("".join(claim_owner)) > 8:
                break
    # the process "died": its claim is still held by a run that will never finish
    store.db.execute("UPDATE sessions SET owner=?", (dead_owner(),))
    recovered = await open_session(a, store, "s")
    assert recovered.history.recovery is not None
    assert recovered.history.carry_over == "".join(claim_owner)


async def test_a_question_is_answered_through_the_store(store):
    from loopwright import Answer
    from loopwright.tools import ask_user

    a = Agent(
        name="asker",
        model=scripted({"tool_calls": [call("ask_user", "q", question="Why?")]}, "understood"),
        tools=[ask_user],
    )
    session = await open_session(a, store, "s", tenant="acme")
    assert (await drive(session.run("go"))).stop_reason == "paused"
    [item] = store.pending("acme", agent="asker")
    assert (item.kind, item.tool, item.call_id, item.reason) == (
        "question",
        "ask_user",
        "q",
        "Why?",
    )
    refused = await resolve(store, a, item.id, Approval.approve(), tenant="acme")
    assert refused.status == "invalid"
    assert (
        await resolve(store, a, item.id, Answer(text="because", by="ana"), tenant="acme")
    ).status == "resolved"
    answered = store.pending_item(item.id, "acme")
    assert (answered.status, answered.answer, answered.decided_by) == ("answered", "because", "ana")
    later = await open_session(a, store, "s", tenant="acme")
    resumed = await drive(later.resume())
    assert resumed.text == "understood"
    assert later.messages[-2].content == "because"


async def test_a_run_on_a_full_database_stops_with_a_clear_error(tmp_path):
    from loopwright.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "small.db", max_page_count=30)
    a = agent(
        *[{"text": "x" * 2000, "tool_calls": [call("look", f"l{i}", n=i)]} for i in range(40)],
        max_turns=40,
    )
    session = await open_session(a, store, "s")
    with pytest.raises(StoreError, match="full"):
        await session.run("go").result()
    stored = store.load("s", "default")
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    record = store.session("s", "default")
    assert record.status == "interrupted" and record.last_seq == len(stored)


async def test_a_cancelled_durable_run_is_logged_whole_and_resumes_cleanly(store):
    import asyncio

    gate = asyncio.Event()

    @tool
    async def slow(n: int) -> str:
        """Waits for the gate."""
        await asyncio.wait_for(gate.wait(), 5)
        return "never"

    a = Agent(model=scripted({"tool_calls": [call("slow", "s", n=1)]}, "after"), tools=[slow])
    session = await open_session(a, store, "s")
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            asyncio.get_running_loop().call_later(0.01, session.cancel)
    assert events[-2].type == "loop:aborted"
    stored = [e.event for e in store.load("s", "default")]
    assert stored == [e for e in events if not e.type.endswith(":delta")]
    assert store.session("s", "default").status == "idle"
    again = await open_session(a, store, "s")
    assert again.messages == session.messages
    assert_history_valid(again.messages)
    assert (await drive(again.run("and now?"))).text == "after"
