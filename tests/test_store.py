"""The durable Python API: `open_log`, one session kept in the log (`runtime.open_session`), a
`Runtime` resolving its items from another process, and the exports. (The store's own
contract is `log_conformance*.py`, run on both backends by `test_log_conformance.py`.)"""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from conftest import assert_history_valid, call, drive, scripted
from loopwright import Agent, Answer, Approval, Rules, SessionBusy, tool
from loopwright import events as ev
from loopwright.errors import UnknownPending
from loopwright.runtime import open_session
from loopwright.store import SessionKey, StoreError, open_log
from loopwright.store.export import export_jsonl, export_traces, read_jsonl
from loopwright.store.log import Verdict
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ask_user
from loopwright.wire import dumps
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import Clock, Held, ended, never

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


KEY = SessionKey("default", "payer", "s")


async def test_open_log_opens_the_projects_data_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    log = await open_log()
    assert isinstance(log, SQLiteLog)
    assert log.path.resolve() == (tmp_path / ".loopwright" / "loopwright.db").resolve()
    await log.close()


async def test_the_log_is_the_history_the_stream_and_the_usage(logs):
    log = await logs()
    a = agent(
        {"tool_calls": [call("look", "l", n=1)], "usage": {"input_tokens": 9, "output_tokens": 3}},
        {"text": "done", "usage": {"input_tokens": 12, "output_tokens": 1, "cost": 0.002}},
    )
    session = await open_session(a, log, "s", tenant="acme")
    result = await drive(session.run("hello"))
    key = SessionKey("acme", "payer", "s")
    stored = [e.event for e in await log.read(key)]
    assert stored == [e for e in result.events if not e.type.endswith(":delta")]
    again = await open_session(a, log, "s", tenant="acme")
    assert again.messages == session.messages
    assert_history_valid(again.messages)
    usage = await log.usage("acme")
    assert (usage["requests"], usage["input_tokens"], usage["output_tokens"]) == (2, 21, 4)
    assert usage["cost"] == 0.002
    assert (await log.session(key)).status == "idle"
    other = await open_session(Agent(name="other", model=scripted("hi")), log, "s", tenant="acme")
    assert other.messages == []  # the same id under another agent is another session


async def test_a_paused_run_is_resolved_in_another_process_and_resumes_there(logs, runtimes):
    a = agent(
        {"tool_calls": [call("pay", "p1", n=1), call("look", "l", n=2), call("pay", "p2", n=3)]},
        "all paid",
    )
    session = await open_session(a, await logs(), "s")
    result = await drive(session.run("go"))
    assert result.stop_reason == "paused" and executed == ["look 2"]
    log = await logs()  # another process, with a runtime on the same file
    runtime = runtimes({"payer": a}, log)
    assert (await log.session(KEY)).status == "paused"
    first, second = await runtime.pending("default", agent="payer")
    assert (first.call_id, second.call_id, first.status) == ("p1", "p2", "open")
    bad = await runtime.resolve("default", first.id, Approval.approve(args={"n": "lots"}))
    assert (bad.status, len(bad.outstanding)) == ("invalid", 2)
    assert bad.error is not None and bad.error.startswith("edited arguments are invalid: n:")
    ok = await runtime.resolve("default", first.id, Approval.approve(args={"n": 10}, by="ana"))
    assert (ok.status, [p.id for p in ok.outstanding]) == ("waiting", [second.id])
    again = await runtime.resolve("default", first.id, Approval.deny())
    assert (again.status, again.item.decided_by) == ("already_resolved", "ana")
    with pytest.raises(UnknownPending):
        await runtime.resolve("intruder", second.id, Approval.approve())
    done = await runtime.resolve("default", second.id, Approval.approve(by="bo"))
    assert done.status == "resumed" and done.run is not None
    assert (await ended(done.run)).text == "all paid"
    assert executed == ["look 2", "pay 10", "pay 3"]
    decided = await log.pending_item("default", first.id)
    assert (decided.status, decided.decided_by, decided.edited_args) == (
        "approved",
        "ana",
        {"n": 10},
    )
    assert decided.decided_at is not None
    assert_history_valid((await runtime.open(KEY)).messages)
    assert await runtime.pending("default") == []


async def test_a_scripts_live_approver_decides_through_the_log(logs):
    """One authority on the Python API's session too: the prompt's answer is the item's
    recorded decision, and a decision made elsewhere while it asks overtakes it."""
    a = agent(
        {"tool_calls": [call("pay", "p1", n=1)]},
        "paid",
        {"tool_calls": [call("pay", "p2", n=2)]},
        "not paid",
    )
    log = await logs()
    session = await open_session(a, log, "s")
    result = await drive(session.run("go", approver=lambda r: Approval.approve(by="me")))
    assert (result.text, executed) == ("paid", ["pay 1"])
    [first] = (await log.pending("default", status=None)).items
    assert (first.status, first.decided_by) == ("approved", "me")

    other = await logs()  # another process decides while the prompt is up
    asked, closed = asyncio.Event(), asyncio.Event()

    async def prompt(request):
        asked.set()
        try:
            await asyncio.Event().wait()  # nobody types
        finally:
            closed.set()

    async def elsewhere():
        await asked.wait()
        [item] = (await other.pending("default")).items
        await other.decide("default", item.id, Verdict("denied", "bob", note="no"))

    deciding = asyncio.ensure_future(elsewhere())
    result = await drive(session.run("again", approver=prompt))
    await deciding
    assert closed.is_set() and executed == ["pay 1"]
    assert result.text == "Stopped: denied pay. Send another message to continue."
    second = (await log.pending("default", status=None)).items[-1]
    assert (second.status, second.decided_by) == ("denied", "bob")


async def test_a_denial_closes_the_batch_and_skips_the_rest(logs, runtimes):
    a = agent({"tool_calls": [call("pay", "p1", n=1), call("pay", "p2", n=2)]}, "unused")
    log = await logs()
    await drive((await open_session(a, log, "s")).run("go"))
    runtime = runtimes({"payer": a}, log)
    first, second = await runtime.pending("default")
    denied = await runtime.resolve("default", first.id, Approval.deny("no"))
    assert (denied.status, denied.outstanding) == ("resumed", [])
    assert denied.run is not None and (await ended(denied.run)).stop_reason == "denied"
    assert (await log.pending_item("default", second.id)).status == "skipped"
    late = await runtime.resolve("default", second.id, Approval.approve())
    assert late.status == "already_resolved" and executed == []


async def test_two_runs_on_one_session_exactly_one_proceeds(logs):
    refused = asyncio.Event()

    async def answer(request):  # the first run holds its lease until the second was refused
        await refused.wait()
        return "first"

    a = Agent(name="payer", model=FunctionModel(answer), tools=[look, pay], rules=RULES)
    first = await open_session(a, await logs(), "s")
    second = await open_session(a, await logs(), "s")  # as another process would
    run = first.run("one")
    await run.__anext__()
    with pytest.raises(SessionBusy, match="held by another run"):
        await second.run("two").result()
    refused.set()
    result = await run.result()
    assert (result.stop_reason, result.text) == ("completed", "first")


async def test_export_round_trips_and_traces_hold_the_context(logs, tmp_path):
    log = await logs()
    a = agent({"tool_calls": [call("look", "l", n=1)]}, "done")
    await drive((await open_session(a, log, "s")).run("hi"))
    out = io.StringIO()
    count = await export_jsonl(log, KEY, out)
    lines = out.getvalue().splitlines()
    assert count == len(lines) == len(await log.read(KEY))
    assert json.loads(lines[0])["event"] == {"type": "session", "sessionId": "s"}
    assert read_jsonl(iter(lines)) == await log.read(KEY)
    [trace] = await export_traces(log, a, KEY, tmp_path / "traces")
    assert trace.name == "s.context-1.json"
    assert [m["role"] for m in json.loads(trace.read_text())] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


class CutOff:
    """A model that streams the start of its reply, then hangs: its process is as good as dead."""

    name = "cut-off"

    def __init__(self, text: str, chunk: int = 4) -> None:
        self.text, self.chunk = text, chunk
        self.hung = asyncio.Event()

    async def stream(self, request):
        async for item in Reply(text=self.text, chunk=self.chunk).stream(request, self.name):
            if isinstance(item, ev.MessageCompleted):
                break
            yield item  # the run commits it (as `message:partial`) before asking for more
        self.hung.set()
        await asyncio.Event().wait()


async def test_a_run_cut_off_mid_reply_leaves_carry_over(logs, runtimes):
    clock, model = Clock(), CutOff("a long reply that never finishes")
    dead = {"payer": Agent(name="payer", model=model)}
    dying = runtimes(dead, await logs(clock), sleep=never, partial_every=0.0)
    await dying.send("default", "payer", "s", "tell me")
    await model.hung.wait()
    clock.advance(31)  # its lease expired: the run died
    heir = runtimes({"payer": agent()}, await logs(clock))
    recovered = await heir.open(KEY)
    assert recovered.state.recovery is not None
    assert recovered.state.carry_over == model.text


async def test_a_long_reply_cut_off_is_logged_once_as_partials(logs, runtimes):
    """A 40 kB reply streamed in 100-character deltas, each committed as `message:partial`
    (`partial_every` 0): each partial holds only what was added since the last one, from the
    offset where it starts, so the log holds the text once (not its prefix again and again),
    and the carry-over a crash leaves is the whole text streamed."""
    clock, text = Clock(), "".join(f"{i:05d} and on and on " for i in range(2000))
    model = CutOff(text, chunk=100)
    dead = {"payer": Agent(name="payer", model=model)}
    dying = runtimes(dead, await logs(clock), sleep=never, partial_every=0.0)
    await dying.send("default", "payer", "s", "tell me")
    await model.hung.wait()
    partials = [s.event for s in await dying.log.read(KEY) if s.event.type == "message:partial"]
    parts = [text[i : i + 100] for i in range(0, len(text), 100)]
    assert len(text) == 40_000 and len(parts) == 400
    assert [(p.offset, p.text) for p in partials] == [(100 * i, t) for i, t in enumerate(parts)]
    stored = sum(len(dumps(p)) for p in partials)
    assert stored < 2 * len(text)  # each character once (the whole text each time: 8 MB)
    clock.advance(31)  # its lease expired: the run died
    heir = runtimes({"payer": agent()}, await logs(clock))
    recovered = await heir.open(KEY)
    assert recovered.state.recovery is not None
    assert recovered.state.carry_over == text


async def test_a_question_is_answered_from_another_process(logs, runtimes):
    a = Agent(
        name="asker",
        model=scripted({"tool_calls": [call("ask_user", "q", question="Why?")]}, "understood"),
        tools=[ask_user],
    )
    log = await logs()
    session = await open_session(a, log, "s", tenant="acme")
    assert (await drive(session.run("go"))).stop_reason == "paused"
    runtime = runtimes({"asker": a}, await logs())
    [item] = await runtime.pending("acme", agent="asker")
    assert (item.kind, item.tool, item.call_id, item.reason) == (
        "question",
        "ask_user",
        "q",
        "Why?",
    )
    refused = await runtime.resolve("acme", item.id, Approval.approve())
    assert (refused.status, refused.error) == ("invalid", f"{item.id} is a question: answer it")
    answered = await runtime.resolve("acme", item.id, Answer(text="because", by="ana"))
    assert answered.status == "resumed" and answered.run is not None
    assert (await ended(answered.run)).text == "understood"
    decided = await log.pending_item("acme", item.id)
    assert (decided.status, decided.answer, decided.decided_by) == ("answered", "because", "ana")
    later = await runtime.open(SessionKey("acme", "asker", "s"))
    assert later.messages[-2].content == "because"


async def test_a_run_on_a_full_database_stops_with_a_clear_error(logs):
    log = await logs()
    await log._call(lambda db: db.execute("PRAGMA max_page_count=40"))  # this connection's cap
    a = agent(
        *[{"text": "x" * 2000, "tool_calls": [call("look", f"l{i}", n=i)]} for i in range(40)],
        max_turns=40,
    )
    session = await open_session(a, log, "s")
    with pytest.raises(StoreError, match="full"):
        await session.run("go").result()
    stored = await log.read(KEY)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))  # nothing committed lost
    record = await log.session(KEY)
    assert record.status == "interrupted" and record.last_seq == len(stored)


async def test_a_cancelled_durable_run_is_logged_whole_and_resumes_cleanly(logs):
    gate = asyncio.Event()

    @tool
    async def slow(n: int) -> str:
        """Waits for the gate."""
        await gate.wait()
        return "never"

    log = await logs()
    a = Agent(model=scripted({"tool_calls": [call("slow", "s", n=1)]}, "after"), tools=[slow])
    session = await open_session(a, log, "s")
    events: list[ev.Event] = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            session.cancel()
    assert events[-2].type == "loop:aborted"
    key = SessionKey("default", "agent", "s")
    stored = [e.event for e in await log.read(key)]
    assert stored == [e for e in events if not e.type.endswith(":delta")]
    assert (await log.session(key)).status == "idle"
    again = await open_session(a, log, "s")
    assert again.messages == session.messages
    assert_history_valid(again.messages)
    assert (await drive(again.run("and now?"))).text == "after"


async def test_a_message_sent_to_a_live_run_is_logged_when_steer_returns(logs, runtimes):
    held = Held()
    log = await logs()
    runtime = runtimes({"payer": Agent(name="payer", model=held.model)}, log)
    live = await runtime.send("default", "payer", "s", "first")
    await held.asked.wait()
    await runtime.steer(KEY, "mind the budget")
    await runtime.follow_up(KEY, "and say goodbye")
    queued = [s.event for s in await log.read(KEY) if s.event.type == "steering:queued"]
    assert [(e.mode, e.text) for e in queued] == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]
    held.give("noted")  # the steering, then (as the run would stop) the follow-up
    held.give("within budget")
    held.give("bye")
    assert (await ended(live)).text == "bye"
