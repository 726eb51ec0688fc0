"""Controls a pi-agent-core user expects (issue 14, item 11): waiting from any task until a
session is idle, and inspecting and clearing its steering and follow-up queues."""

from __future__ import annotations

import asyncio

import pytest

from conftest import call, drive, scripted, verify
from loopwright import Agent, Session, tool
from loopwright.loop.session import Queued
from loopwright.messages import UserMessage
from loopwright.testing import types

REPLY = ["text:delta", "message:completed"]
ANSWER = ["step:started", "budget:check", *REPLY, "step:finished", "loop:done", "done"]
TOOL_STEP = [
    "step:started",
    "budget:check",
    "tool:delta",
    "message:completed",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:finished",
]

gates: dict[str, asyncio.Event] = {}


@tool
async def hold() -> str:
    """Waits until the test opens the gate (or a minute: a safety net, never reached)."""
    await asyncio.wait_for(gates["hold"].wait(), 60)
    return "released"


def held_session(*replies: object) -> tuple[Session, asyncio.Event]:
    gates["hold"] = gate = asyncio.Event()
    model = scripted({"tool_calls": [call("hold")]}, *replies)
    return Session(Agent(model=model, tools=[hold])), gate


def users(session: Session) -> list[str]:
    return [m.content for m in session.messages if isinstance(m, UserMessage)]


# ---- idle ------------------------------------------------------------------------------------


async def test_idle_returns_at_once_without_a_run():
    session = Session(Agent(model=scripted("ok")))
    await session.idle()
    await drive(session.run("hi"))
    await session.idle()
    assert not session.busy


async def test_another_task_waits_until_the_run_is_over():
    session, gate = held_session("done")
    waiting = asyncio.Event()

    async def waiter() -> tuple[bool, bool]:
        waiting.set()
        await session.idle()
        return session.busy, run.finished

    run = session.run("go")
    idle = asyncio.create_task(waiter())
    await waiting.wait()
    events = []
    async for event in run:
        events.append(event)
        if event.type == "tool:started":
            assert not idle.done()  # the run is in progress: still waiting
            gate.set()
        if event.type == "done":
            assert not idle.done()  # `done` is out, but the run's task has not ended
    verify(events)
    assert types(events) == ["session", "input:received", *TOOL_STEP, *ANSWER]
    assert await asyncio.wait_for(idle, 60) == (False, True)  # (a safety net, never reached)


async def test_idle_waits_for_a_run_nobody_started_until_it_is_closed():
    session = Session(Agent(model=scripted("ok")))
    waiting = asyncio.Event()

    async def waiter() -> bool:
        waiting.set()
        await session.idle()
        return session.busy

    run = session.run("hi")
    idle = asyncio.create_task(waiter())
    await waiting.wait()
    assert not idle.done() and session.busy
    await run.aclose()
    assert await asyncio.wait_for(idle, 60) is False  # (a safety net, never reached)


async def test_idle_waits_for_a_run_drained_by_another_task():
    session, gate = held_session("done")
    run = session.run("go")
    result = asyncio.create_task(run.result())
    waiting = asyncio.Event()

    async def waiter() -> bool:
        waiting.set()
        await session.idle()
        return session.busy

    cancelled, idle = asyncio.create_task(session.idle()), asyncio.create_task(waiter())
    await waiting.wait()
    cancelled.cancel()  # a waiter cancelled meanwhile changes nothing for the others
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not idle.done() and session.busy
    gate.set()
    assert await asyncio.wait_for(idle, 60) is False  # (a safety net, never reached)
    assert types((await result).events) == ["session", "input:received", *TOOL_STEP, *ANSWER]


# ---- the queues ------------------------------------------------------------------------------


def test_queued_shows_what_was_sent_and_not_delivered():
    session = Session(Agent(model=scripted("ok")))
    assert session.queued == Queued() and len(session.queued) == 0
    session.steer("a")
    session.follow_up("c")
    session.steer("b")
    view = session.queued
    assert view == Queued(steering=("a", "b"), follow_ups=("c",)) and len(view) == 3
    session.steer("d")
    assert view.steering == ("a", "b")  # a copy: later sends do not change it
    assert session.queued.steering == ("a", "b", "d")


def test_clear_queue_by_mode_returns_what_it_dropped():
    session = Session(Agent(model=scripted("ok")))
    session.steer("a")
    session.steer("b")
    session.follow_up("c")
    session.follow_up("d")
    assert session.clear_queue("steer") == Queued(steering=("a", "b"))
    assert session.queued == Queued(follow_ups=("c", "d"))
    session.steer("e")
    assert session.clear_queue("follow_up") == Queued(follow_ups=("c", "d"))
    assert session.queued == Queued(steering=("e",))
    session.follow_up("f")
    assert session.clear_queue() == Queued(steering=("e",), follow_ups=("f",))
    assert session.queued == Queued() and session.clear_queue() == Queued()


async def test_a_queue_cleared_before_the_run_is_not_delivered():
    session = Session(Agent(model=scripted("ok")))
    session.steer("stale")
    session.follow_up("stale too")
    session.clear_queue()
    result = await drive(session.run("hi"))
    assert types(result.events) == ["session", "input:received", *ANSWER]
    assert users(session) == ["hi"]


async def test_a_queue_cleared_during_the_run_is_not_delivered():
    session, gate = held_session("done")
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            session.steer("steer me")
            session.follow_up("then this")
            assert session.queued == Queued(steering=("steer me",), follow_ups=("then this",))
            cleared = session.clear_queue()
            assert cleared == Queued(steering=("steer me",), follow_ups=("then this",))
            gate.set()
    verify(events)
    assert types(events) == ["session", "input:received", *TOOL_STEP, *ANSWER]
    assert users(session) == ["go"] and session.queued == Queued()


async def test_a_cancel_just_after_a_run_ended_drops_what_was_queued():
    """`steer(); cancel()` once a run has ended: no run is stopped, but nothing queued reaches
    the next run (issue 30, window 6: `queued` still held it and the next run delivered it)."""
    session = Session(Agent(model=scripted("first", "second")))
    run = session.run("hi")
    await drive(run)
    session.steer("stale")
    session.follow_up("stale too")
    session.cancel()
    assert session.queued == Queued() and not run.cancelled
    result = await drive(session.run("again"))
    assert types(result.events) == ["session", "input:received", *ANSWER]
    assert users(session) == ["hi", "again"]


async def test_a_cancel_of_an_idle_durable_session_drops_its_logged_queue(tmp_path):
    """A durable session read from its log with a steer and a follow-up queued there (logged
    for its next run): a cancel with no run in progress drops them in the log too
    (`steering:cleared`), so a session read again has nothing queued and its run gets none."""
    from loopwright import events as ev
    from loopwright.runtime import Runtime, open_session
    from loopwright.store import SessionKey, open_log

    agent = Agent(name="a", model=scripted("first", "second"))
    key = SessionKey("default", "a", "s1")
    log = await open_log(tmp_path / "db.sqlite")
    try:
        runtime = Runtime({"a": agent}, log)
        await (await runtime.send("default", "a", "s1", "hi")).wait()
        await runtime.steer(key, "stale")  # no run goes: logged for the next one
        await runtime.follow_up(key, "stale too")
        session = await open_session(agent, log, "s1")
        assert session.queued == Queued(steering=("stale",), follow_ups=("stale too",))
        session.cancel()
        assert session.queued == Queued() and session.state.queued == []
        await session.journal.flushed()  # type: ignore[union-attr]
        stored = [s.event for s in await log.read(key)]
        assert [e.type for e in stored][-4:] == [
            "done",
            "steering:queued",
            "steering:queued",
            "steering:cleared",
        ]
        assert stored[-1] == ev.SteeringCleared(mode=None)
        assert (await log.session(key)).status == "idle"
        again = await open_session(agent, log, "s1")
        assert again.queued == Queued()
        result = await drive(again.run("again"))
        assert types(result.events) == ["session", "input:received", *ANSWER]
        assert users(again) == ["hi", "again"]
        await runtime.close()
    finally:
        await log.close()


async def test_a_runtime_cancel_with_no_run_drops_the_queue_logged_for_the_next_run(tmp_path):
    """`Runtime.cancel_run` (the HTTP cancel's) when no run holds the session: the answer is
    False (no run was cancelled) and, before it, the steering logged for the next run is
    dropped in the log (`steering:cleared`): the next run does not get it."""
    from loopwright import events as ev
    from loopwright.runtime import Runtime
    from loopwright.store import SessionKey, open_log

    agent = Agent(name="a", model=scripted("first", "second"))
    key = SessionKey("default", "a", "s1")
    log = await open_log(tmp_path / "db.sqlite")
    try:
        runtime = Runtime({"a": agent}, log)
        await (await runtime.send("default", "a", "s1", "hi")).wait()
        await runtime.steer(key, "stale")
        assert await runtime.cancel_run(key, wait=5) is False
        stored = [s.event for s in await log.read(key)]
        assert [e.type for e in stored][-3:] == ["done", "steering:queued", "steering:cleared"]
        assert stored[-1] == ev.SteeringCleared(mode=None)
        assert (await log.session(key)).status == "idle"
        assert await runtime.cancel_run(key, wait=5) is False  # nothing queued: nothing logged
        assert len(await log.read(key)) == len(stored)
        live = await runtime.send("default", "a", "s1", "again")
        done = await live.wait()
        assert done is not None and done.stop_reason == "completed"
        kinds = [s.event.type for s in await log.read(key, after=len(stored))]
        assert kinds == ["session", "input:received", *(k for k in ANSWER if k != "text:delta")]
        await runtime.close()
    finally:
        await log.close()


async def follow_up_at_the_tool(*, steer_and_clear: bool) -> tuple[Session, list]:
    """A run given a follow-up while its tool runs (and steering it then clears, or not)."""
    session, gate = held_session("noted", "done")
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            if steer_and_clear:
                session.steer("dropped")
            session.follow_up("kept")
            if steer_and_clear:
                assert session.clear_queue("steer") == Queued(steering=("dropped",))
                assert session.queued == Queued(follow_ups=("kept",))
            gate.set()
    verify(events)
    return session, events


async def test_clearing_one_mode_keeps_the_other_for_delivery():
    session, events = await follow_up_at_the_tool(steer_and_clear=True)
    _, alone = await follow_up_at_the_tool(steer_and_clear=False)
    assert types(events) == types(alone)  # as if the steering had never been sent
    assert types(events).count("steering:injected") == 1
    injected = [e.message for e in events if e.type == "steering:injected"]
    assert injected == [e.message for e in alone if e.type == "steering:injected"]
    assert injected == [UserMessage(content="kept")]
    assert users(session) == ["go", "kept"]


async def test_a_durable_sessions_cleared_queue_stays_cleared_in_its_log(tmp_path):
    """A durable session logs what was sent to its running run (`steering:queued`) and what was
    cleared (`steering:cleared`): read again from the log, the session has nothing queued, as
    live (before, the next process's run delivered the cleared messages)."""
    from loopwright.runtime import open_session
    from loopwright.state.replay import fold
    from loopwright.store import open_log
    from loopwright.store.log import SessionKey

    gates["hold"] = gate = asyncio.Event()
    model = scripted({"tool_calls": [call("hold")]}, "done", "noted")
    agent = Agent(name="held", model=model, tools=[hold])
    log = await open_log(tmp_path / "db")
    session = await open_session(agent, log, "s1")
    async for event in session.run("go"):
        if event.type == "tool:started":
            session.steer("dropped")
            session.follow_up("kept")
            session.follow_up("also dropped")
            assert session.clear_queue("follow_up") == Queued(follow_ups=("kept", "also dropped"))
            session.follow_up("kept")
            assert session.clear_queue("steer") == Queued(steering=("dropped",))
            gate.set()
    stored = [s.event for s in await log.read(SessionKey("default", "held", "s1"))]
    logged = [(e.type, getattr(e, "mode", None)) for e in stored if "steering" in e.type]
    assert logged == [
        ("steering:queued", "steer"),
        ("steering:queued", "follow_up"),
        ("steering:queued", "follow_up"),
        ("steering:cleared", "follow_up"),
        ("steering:queued", "follow_up"),
        ("steering:cleared", "steer"),
        ("steering:injected", "follow_up"),
    ]
    assert fold(stored, agent._by_name).queued == [] == session.state.queued
    again = await open_session(agent, log, "s1")
    assert again.state.queued == [] and users(again) == ["go", "kept"]
    await log.close()
