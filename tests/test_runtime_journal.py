"""The journal over the event log: seqs for committed events only, leases renewed by a heartbeat,
a dead run's session taken over (its open items closed, its batch recovered), and the old run
ended by `StaleWriter` at its next append or renewal. Clocks are injected; nothing sleeps."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from conftest import ROOT, call, drive, scripted, verify
from loopwright import Agent, Answer, Approval, Hooks
from loopwright import events as ev
from loopwright.errors import SessionBusy
from loopwright.messages import AssistantMessage
from loopwright.runtime import Settings
from loopwright.runtime.journal import session_in_log
from loopwright.state import replay
from loopwright.store import StaleWriter
from loopwright.testing import check_events
from loopwright.tools import ask_user
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import (
    KEY,
    RULES,
    Beats,
    Clock,
    Held,
    ended,
    logged,
    look,
    never,
    paid,
    pay,
    payer,
    pays,
)


async def test_append_numbers_only_the_events_it_committed(logs):
    log = await logs()
    agent = payer({"tool_calls": [call("look", "l1", n=1)]}, "seen")
    session = await session_in_log(log, agent, KEY, Settings())
    numbered = []
    async with session.run("go") as run:
        async for event in run:
            if not event.type.endswith(":delta"):
                numbered.append((run.seq, event.type))
    assert numbered == [
        (None, "session"),
        (2, "input:received"),
        (None, "step:started"),
        (None, "budget:check"),
        (5, "message:completed"),  # committed with the call's intent: held until then (P8)
        (6, "actauth:decision"),  # (held behind it)
        (7, "tool:started"),
        (None, "toollane:result"),
        (None, "tool:output"),
        (10, "tool:result"),
        (None, "step:finished"),
        (None, "step:started"),
        (None, "budget:check"),
        (14, "message:completed"),  # committed with the run's end: held until then
        (15, "step:finished"),
        (16, "loop:done"),
        (17, "done"),
    ]
    assert await logged(log, KEY) == [kind for _, kind in numbered]
    assert session.journal.loaded_seq == 17  # its next run need not read the log again
    again = await session_in_log(log, agent, KEY, Settings())
    assert again.messages == session.messages


async def test_an_ask_reaches_readers_only_once_its_item_is_in_the_log(logs):
    """A client that decides on seeing `approval:pending` (before `pending:requested`), as a
    loopengine v1 client does, finds the item and the call it is about: the announcement is
    committed with its `pending:requested`, in one append, and reaches readers once it is
    (issue 30: an item decided between two commits, its call unnamed, was one nothing could act
    on after a crash)."""
    log = await logs()
    appends: list[list[str]] = []
    append = log.append

    def recorded(lease: Any, events: Any) -> Any:
        appends.append([e.type for e in events])
        return append(lease, events)

    log.append = recorded  # type: ignore[method-assign]
    session = await session_in_log(log, payer(*pays()), KEY, Settings())
    found = []
    async with session.run("go") as run:
        async for event in run:
            if event.type == "approval:pending":
                item = await log.pending_item(KEY.tenant, event.id)  # type: ignore[union-attr]
                found.append((run.seq, item.status, item.tool, item.call_id))
    assert found == [(6, "open", "pay", "p1")]
    [asked] = [types for types in appends if "approval:pending" in types]
    assert asked[-2:] == ["approval:pending", "pending:requested"]


async def test_a_session_kept_open_is_resolved_and_resumed_in_place(logs):
    log = await logs()
    session = await session_in_log(log, payer(*pays(5)), KEY, Settings())
    assert (await session.run("go").result()).stop_reason == "paused"
    [item] = session.pending
    resolution = await session.resolve(item.id, Approval.approve(by="ann"))
    assert (resolution.status, resolution.outstanding) == ("resolved", 0)
    assert (await session.resolve(item.id, Approval.deny())).status == "already_resolved"
    assert (await session.resume().result()).text == "all paid" and paid == [5]
    assert (await log.pending_item("acme", item.id)).decided_by == "ann"


async def test_the_heartbeat_renews_the_lease(logs, runtimes):
    clock, beats, held = Clock(), Beats(), Held()
    agent = Agent(name="payer", model=held.model)
    here = runtimes({"payer": agent}, await logs(clock), sleep=beats.sleep)
    other = runtimes({"payer": agent}, await logs(clock))
    live = await here.send("acme", "payer", "s1", "one")
    clock.advance(20)
    await beats.beat()  # renewed for 30 s from now
    await beats.asleep.wait()
    clock.advance(20)  # past the first expiry, within the renewed one
    with pytest.raises(SessionBusy, match="held by another run"):
        await other.send("acme", "payer", "s1", "two")
    held.give("done")
    assert (await ended(live)).text == "done"


async def test_an_expired_lease_is_taken_over_and_the_old_run_ends_at_its_next_append(
    logs, runtimes
):
    clock, held = Clock(), Held()
    log = await logs(clock)
    dead = runtimes({"payer": Agent(name="payer", model=held.model)}, log, sleep=never)
    heir = runtimes({"payer": payer("fresh start")}, await logs(clock))
    stalled = await dead.send("acme", "payer", "s1", "one")
    await held.asked.wait()
    with pytest.raises(SessionBusy):
        await heir.send("acme", "payer", "s1", "two")
    clock.advance(31)  # its process stopped renewing: the lease expired
    assert (await heir.session(KEY)).status == "interrupted"
    taken = await heir.send("acme", "payer", "s1", "two")
    assert (await ended(taken)).text == "fresh start"
    assert "run:interrupted" in [e.type for e in taken.items]  # the dead run was recovered
    held.give("too late")
    assert await stalled.wait() is None
    assert isinstance(stalled.failure, StaleWriter)
    replies = [e async for _, e in heir.events(KEY) if e.type == "message:completed"]
    assert [e.message.text for e in replies] == ["fresh start"]  # nothing of the old run


async def test_a_takeover_found_by_the_heartbeat_ends_the_old_run(logs, runtimes):
    clock, beats, held = Clock(), Beats(), Held()
    log = await logs(clock)
    old = runtimes({"payer": Agent(name="payer", model=held.model)}, log, sleep=beats.sleep)
    heir = runtimes({"payer": payer("mine now")}, await logs(clock))
    stalled = await old.send("acme", "payer", "s1", "one")
    await held.asked.wait()
    clock.advance(31)  # the heartbeat was late (a stalled machine)
    assert (await ended(await heir.send("acme", "payer", "s1", "two"))).text == "mine now"
    await beats.beat()  # the renewal is refused: the run stops where it waits
    assert await stalled.wait() is None
    assert isinstance(stalled.failure, StaleWriter)
    assert not held.asked.is_set()  # the model's request was cancelled, never answered


async def test_a_takeover_keeps_open_the_items_a_dead_run_waited_on(logs, runtimes):
    """P4: the dead run waited on its approval live (a client held its stream); the process
    that takes the session over logs the pause the run would have reached had its approver
    deferred, so the item stays open, and deciding it there resumes the session: the call runs
    once, there. The dead run ends at its next append (it never runs the call)."""
    clock = Clock()
    log = await logs(clock)
    dead = runtimes({"payer": payer(*pays(1))}, log, sleep=never)
    heir = runtimes({"payer": payer("carrying on")}, await logs(clock))
    waiting = await dead.send("acme", "payer", "s1", "go", hold=True)
    stream = waiting.stream()
    async for _, event in stream:
        if event.type == "pending:requested":
            break  # its approver waits for a decision, live
    [item] = await heir.pending("acme")
    before = (await log.session(KEY)).last_seq
    clock.advance(31)
    assert [p.id for p in await heir.pending("acme")] == [item.id]  # still open
    assert (await log.session(KEY)).status == "paused"
    ending = [s.event for s in await log.read(KEY, after=before)]
    assert [e.type for e in ending] == ["actauth:decision", "step:finished", "loop:paused", "done"]
    assert ending[0] == ev.ActauthDecision(tool="pay", decision="ask", reason=ending[0].reason)
    assert ending[2] == ev.LoopPaused(pending_ids=[item.id])
    assert ending[3] == ev.Done(text="Paused: waiting for approval of pay.", stop_reason="paused")
    resolved = await heir.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.status == "resumed" and resolved.run is not None
    assert (await ended(resolved.run)).text == "carrying on"
    assert paid == [1]
    await stream.aclose()
    assert await waiting.wait() is None and isinstance(waiting.failure, StaleWriter)
    stored = [s.event for s in await log.read(KEY)]
    assert [e.id for e in stored if isinstance(e, ev.ToolStarted)] == ["p1"]  # once
    assert paid == [1]


CRASHING = """
import asyncio, sys
sys.path.insert(0, {tests!r})
from test_runtime_journal import asker
from loopwright.runtime import Runtime
from loopwright.store.sqlite_log import SQLiteLog

async def main():
    log = SQLiteLog({path!r})
    runtime = Runtime({{"payer": asker(*{replies!r})}}, log)
    live = await runtime.send("acme", "payer", "s1", "go", hold={hold!r})
    async for _ in live.stream():  # (held: a client watches; its approver waits, live)
        pass
    await live.wait()

asyncio.run(main())
"""


def asker(*replies: Any) -> Agent:
    """`payer`, with a question tool too (the replies are scripted)."""
    paid.clear()
    return Agent(name="payer", model=scripted(*replies), tools=[pay, look, ask_user], rules=RULES)


async def crash(tmp_path: Any, point: str, replies: Any, hold: bool = False) -> None:
    """A run of `payer` in a process of its own, killed right after its commit of `point`;
    its short lease has expired by the time anyone looks."""
    path = tmp_path / "loopwright.db"
    script = CRASHING.format(tests=str(ROOT / "tests"), path=str(path), replies=replies, hold=hold)
    env = {**os.environ, "LOOPWRIGHT_CRASH_AFTER": point, "LOOPWRIGHT_LEASE_SECONDS": "0.001"}
    crashed = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", textwrap.dedent(script)], env=env, timeout=60
    )
    assert crashed.returncode == 86  # killed right after that commit


@pytest.mark.parametrize("point", ["pending:requested", "done"])
async def test_a_crash_at_a_commit_leaves_items_resumable(logs, runtimes, tmp_path, point):
    """Killed right after its item was logged (before the run deferred and paused) or once
    paused: either way the item is resolvable, then resumable (P4)."""
    log = await logs()
    await crash(tmp_path, point, pays(1))
    runtime = runtimes({"payer": asker("recovered")}, log)
    with pytest.raises(SessionBusy, match="pending items"):  # paused: it takes no new input
        await runtime.send("acme", "payer", "s1", "something else")
    listed = await runtime.pending("acme")
    [item] = await runtime.pending("acme", status=None)
    assert [p.id for p in listed] == [item.id]
    resolved = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.run is not None and (await ended(resolved.run)).text == "recovered"
    assert paid == [1]


WAITED = {  # the dead run's reply, and the decision made after it died
    "approve": (call("pay", "p1", n=1), Approval.approve(by="ann")),
    "deny": (call("pay", "p1", n=1), Approval.deny("no", by="ann")),
    "answer": (call("ask_user", "q1", question="Which one?"), Answer(text="this", by="ann")),
}


@pytest.mark.parametrize("decision", list(WAITED))
async def test_a_process_killed_while_a_watched_run_waits_on_a_human_leaves_it_paused(
    logs, runtimes, tmp_path, decision
):
    """P4, as an auditor saw it break: a client holds the run's stream, so the run waits on
    its item live; its process is killed right after the item is logged. The next process
    logs the pause the run would have reached had its approver deferred (the dead run's
    stream ends paused and passes every check), the item stays open, and a decision there
    resumes the session: the other call of the batch, which the dead run never decided, is
    decided then; each call runs at most once. Before: the item was closed `skipped` by
    `recovery` and the approved call never ran."""
    asked, decided = WAITED[decision]
    log = await logs()
    await crash(
        tmp_path,
        "pending:requested",
        ({"tool_calls": [asked, call("look", "l1", n=2)]},),
        hold=True,
    )
    runtime = runtimes({"payer": asker("recovered")}, log)
    [item] = await runtime.pending("acme")  # open: not closed by the recovery
    assert (item.status, item.call_id) == ("open", asked["id"])
    stored = [s.event for s in await log.read(KEY)]
    assert (await log.session(KEY)).status == "paused"
    dead = stored[: [e.type for e in stored].index("done") + 1]
    verify(dead)  # the dead run's stream, with its pause, is a whole run's
    tail = [e.type for e in dead[[e.type for e in dead].index("pending:requested") + 1 :]]
    what = "an answer to a question" if decision == "answer" else "approval of pay"
    asks = [] if decision == "answer" else ["actauth:decision"]
    assert tail == [*asks, "step:finished", "loop:paused", "done"]
    assert dead[-2:] == [
        ev.LoopPaused(pending_ids=[item.id]),
        ev.Done(text=f"Paused: waiting for {what}.", stop_reason="paused"),
    ]
    resolved = await runtime.resolve("acme", item.id, decided)
    assert resolved.status == "resumed" and resolved.run is not None
    done = await ended(resolved.run)
    ran = [e.id for e in resolved.run.items if isinstance(e, ev.ToolStarted)]
    if decision == "deny":  # the batch stops with the denial: `look` is skipped, unrun
        assert done.stop_reason == "denied" and paid == [] and ran == []
    else:
        assert (done.text, sorted(ran)) == ("recovered", sorted([asked["id"], "l1"]))
        assert paid == ([1] if decision == "approve" else [])
    stored = [s.event for s in await log.read(KEY)]
    assert sorted(e.id for e in stored if isinstance(e, ev.ToolStarted)) == sorted(ran)
    assert await runtime.pending("acme") == []
    assert (await log.session(KEY)).status == "idle"


def test_lease_seconds_may_be_overridden_for_tests(monkeypatch):
    assert Settings(ttl=12).lease_seconds == 12
    monkeypatch.setenv("LOOPWRIGHT_LEASE_SECONDS", "0.5")
    assert Settings(ttl=12).lease_seconds == 0.5


async def test_a_session_paused_on_open_items_takes_no_new_input(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    with pytest.raises(SessionBusy, match="paused on pending items"):
        await runtime.send("acme", "payer", "s1", "something else")
    with pytest.raises(SessionBusy, match="open items"):
        await runtime.resume("acme", "payer", "s1")


async def test_sessions_open_from_their_newest_snapshot(logs, runtimes):
    log = await logs()
    agent = payer({"tool_calls": [call("look", "l1", n=1)]}, "seen", *pays(2, "bye"))
    runtime = runtimes({"payer": agent}, log, snapshot_every=5)
    await ended(await runtime.send("acme", "payer", "s1", "first"))
    kept = await log.snapshot(KEY)
    assert kept is not None and kept.seq == (await log.session(KEY)).last_seq
    await ended(await runtime.send("acme", "payer", "s1", "second"))  # pauses on `pay`
    paused = await runtime.open(KEY)
    assert paused.journal.snapshot_seq == (await log.snapshot(KEY)).seq > kept.seq
    whole = replay.continued(
        replay.fold((s.event for s in await log.read(KEY)), paused.journal.tools), died=False
    )
    assert paused.messages == whole.history.messages and paused.messages  # as folding the whole log
    assert [p.id for p in paused.pending] == [p.id for p in await runtime.pending("acme")]
    other = runtimes({"payer": agent}, await logs())  # another process, from the snapshot
    [item] = await other.pending("acme")
    resolved = await other.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.run is not None and (await ended(resolved.run)).text == "bye"


class Stalled:
    """A log whose commit of a pending item waits until the test lets it go (`go`); the commit
    itself goes on whatever happens to the caller meanwhile, as a database's does."""

    def __init__(self, log: Any) -> None:
        self.log, self.entered, self.go = log, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)

    async def append(self, lease: Any, events: Any) -> int:
        commit = asyncio.ensure_future(self.log.append(lease, events))
        if any(e.type == "pending:requested" for e in events):
            self.entered.set()
            await self.go.wait()
        return await commit


async def test_a_run_cancelled_while_the_log_commits_accounts_for_the_commit(logs, runtimes):
    """Cancelled (Ctrl-C) while its pending item is being committed, the run still learns the
    batch's seqs: its stream shows each event once, as the log holds it."""
    log = Stalled(await logs())
    runtime = runtimes({"payer": payer(*pays(5))}, log)
    live = await runtime.send("acme", "payer", "s1", "go")
    await log.entered.wait()
    assert runtime.cancel(KEY)
    log.go.set()
    assert (await live.wait()) is not None and live.done.stop_reason == "aborted"
    stored = await logged(log, KEY)
    shown = [e.type for e in live.items if not e.type.endswith(":delta")]
    assert shown == stored[: len(shown)]  # each once, in the log's order
    [asked] = [e for e in live.items if e.type == "pending:requested"]
    assert live.seq_of(asked) == stored.index("pending:requested") + 1


# ---- commits that fail (issue 14, item 1) -------------------------------------------------------


async def test_a_reply_the_log_cannot_take_ends_the_run_with_a_logged_error(logs):
    """A lone surrogate in a reply (from a model no provider's edge made valid) fails its commit
    with an error that is no `StoreError`. Its events stay buffered, made valid, and the run ends
    with `loop:error`, committed with them; the lease is released and the session's next message
    works. Before: the run raised, its events were lost, and the session kept the reply."""
    log = await logs()
    agent = Agent(name="payer", model=scripted("bad \ud800 reply"))
    session = await session_in_log(log, agent, KEY, Settings())
    result = await session.run("go").result()
    assert (result.stop_reason, result.events[-2].type) == ("error", "loop:error")
    assert result.events[-2].error.startswith(  # type: ignore[union-attr]
        "CommitFailed: a commit of step:started, budget:check, message:completed failed: "
        "PydanticSerializationError: Error serializing to JSON: UnicodeEncodeError"
    )
    stored = [s.event for s in await log.read(KEY)]
    assert [e.type for e in stored] == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "loop:error",
        "done",
    ]
    check_events(stored)
    record = await log.session(KEY)
    assert (record.status, record.lease_owner) == ("idle", None)
    assert (await session.run("again").result()).stop_reason == "error"  # the same reply
    fine = Agent(name="payer", model=scripted("fine"))
    again = await session_in_log(log, fine, KEY, Settings())
    assert texts(again.messages) == ["go", "bad \ufffd reply", "again", "bad \ufffd reply"]
    assert (await drive(again.run("and now"))).text == "fine"


async def test_a_commit_failing_with_any_error_ends_the_run_and_keeps_its_events(logs):
    """The log's append raises an error that is no `StoreError`, once, as the tool's result is
    committed: nothing of it was stored, so its events stay buffered; the run ends with
    `loop:error`, committed with them (the tool's result is kept, once); the lease is released
    and the next message works."""
    log = await logs()
    append, faults = log.append, []

    async def faulty(lease: Any, events: list[Any]) -> int:
        if not faults and "tool:result" in [e.type for e in events]:
            faults.append([e.type for e in events])
            raise RuntimeError("the disk is on fire")
        return await append(lease, events)

    log.append = faulty  # type: ignore[method-assign]
    agent = payer({"tool_calls": [call("look", "l1", n=1)]}, "seen", "after")
    session = await session_in_log(log, agent, KEY, Settings())
    result = await drive(session.run("go"))
    assert faults == [["toollane:result", "tool:output", "tool:result"]]
    error = "CommitFailed: a commit of toollane:result, tool:output, tool:result failed: "
    assert result.events[-2] == ev.LoopError(error=error + "RuntimeError: the disk is on fire")
    stored = [s.event for s in await log.read(KEY)]
    assert stored == [e for e in result.events if not e.type.endswith(":delta")]
    assert [e.content for e in stored if isinstance(e, ev.ToolOutput)] == ["looked 1"]
    assert (await log.session(KEY)).status == "idle"
    assert (await drive(session.run("again"))).text == "seen"
    again = await session_in_log(log, agent, KEY, Settings())
    assert again.messages == session.messages
    assert texts(again.messages) == ["go", "", "looked 1", "again", "seen"]


async def test_a_log_that_takes_nothing_more_leaves_the_session_interrupted_and_released(logs):
    """When not even the run's `loop:error` can be logged, the run raises the log's own error
    (not a wrapper); its lease is released all the same and the session, `interrupted`, takes
    its next message (recovered, as after a crash)."""
    log = await logs()
    append, broken = log.append, [False]

    async def faulty(lease: Any, events: list[Any]) -> int:
        if broken[0] or "message:completed" in [e.type for e in events]:
            broken[0] = True
            raise RuntimeError("the disk is gone")
        return await append(lease, events)

    log.append = faulty  # type: ignore[method-assign]
    agent = payer("never logged", "logged")
    session = await session_in_log(log, agent, KEY, Settings())
    with pytest.raises(RuntimeError, match="the disk is gone"):
        await session.run("go").result()
    assert await logged(log, KEY) == ["session", "input:received"]
    record = await log.session(KEY)
    assert (record.status, record.lease_owner) == ("interrupted", None)
    log.append = append  # type: ignore[method-assign]
    again = await session_in_log(log, agent, KEY, Settings())
    assert (await drive(again.run("again"))).text == "never logged"
    assert texts(again.messages) == ["go", "again", "never logged"]


def texts(messages: list[Any]) -> list[str]:
    return [m.text if isinstance(m, AssistantMessage) else m.content for m in messages]


async def test_a_failed_reply_leaves_the_log_the_carry_over_the_run_keeps(logs):
    """A reply cut off by a model failure between two `message:partial`s: the log gets the rest
    of its text before `loop:error`, so a session read from the log carries over all that was
    streamed, as the run itself does (before: only what the last partial held)."""
    log = await logs()
    failing = {"fail": {"error": "gone", "after_text": "half of a reply"}, "chunk": 4}
    agent = Agent(name="payer", model=scripted(failing))
    settings = Settings(partial_every=3600.0)  # no partial while it streams
    session = await session_in_log(log, agent, KEY, settings)
    result = await drive(session.run("go"))
    assert result.stop_reason == "error"
    assert session.state.carry_over == "half of a reply"
    stored = [s.event for s in await log.read(KEY)]
    assert [e.type for e in stored][-3:] == ["message:partial", "loop:error", "done"]
    assert (stored[-3].text, stored[-3].offset) == ("half of a reply", 0)  # type: ignore[union-attr]
    again = await session_in_log(log, agent, KEY, settings)
    assert again.state.carry_over == "half of a reply"


@pytest.mark.parametrize("where", ["reading done", "on_run_end", "on_stop"])
async def test_a_cancel_as_the_run_ends_still_releases_the_session(logs, where):
    """A cancel that lands as the run ends (its reader cancels on `done`, a hook at the end of
    the run) cuts nothing short: the session is released `idle`, and its next run starts."""
    log = await logs()
    hooks = {} if where == "reading done" else {where: lambda *_: session.cancel()}
    agent = Agent(name="payer", model=scripted("hi", "again"), hooks=Hooks(**hooks))
    session = await session_in_log(log, agent, KEY, Settings())
    async for event in session.run("go"):
        if event.type == "done":
            assert event.stop_reason == "completed"
            session.cancel()
    await session.idle()
    assert (await log.session(KEY)).status == "idle"
    assert (await session.run("more").result()).text == "again"
