"""One session state (issue 30, point 1): everything a session is lives in its
`replay.SessionState`, and the reducer (`replay.apply`) is its only writer — for an in-memory
session too, whose steering queue is the state's (a steer applies `steering:queued` to it, not
logged). `History` is the conversation only; the paused checkpoint and the recovery are views
derived from the state on each read, never stored."""

from __future__ import annotations

import asyncio
from dataclasses import fields
from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, History, Session, tool
from loopwright import events as ev
from loopwright.loop.session import Queued
from loopwright.messages import UserMessage
from loopwright.runtime import Runtime, open_session
from loopwright.state import replay
from loopwright.state.replay import fold
from loopwright.state.session_state import SessionState
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log

gate: dict[str, asyncio.Event] = {}


@tool
async def hold() -> str:
    """Waits until the test opens the gate (or a minute: a safety net, never reached)."""
    await asyncio.wait_for(gate["hold"].wait(), 60)
    return "released"


def recorded(monkeypatch: pytest.MonkeyPatch, session: Session) -> list[ev.Event]:
    """Every event the reducer applies to the session's state, in order (the driver's and
    `apply`'s calls both go through `replay.HANDLERS`)."""
    seen: list[ev.Event] = []
    for kind, handler in list(replay.HANDLERS.items()):

        def wrapped(state: SessionState, event: Any, handler: Any = handler) -> None:
            if state is session.state:
                seen.append(event)
            handler(state, event)

        monkeypatch.setitem(replay.HANDLERS, kind, wrapped)
    return seen


def split(state: SessionState) -> Queued:
    return Queued(
        tuple(t for m, t in state.queued if m == "steer"),
        tuple(t for m, t in state.queued if m == "follow_up"),
    )


async def test_an_in_memory_sessions_queue_is_what_its_applied_events_fold_to(monkeypatch):
    """Steer, follow up, clear, cancel, deliver: at every point the session's queue is the fold
    of the events the reducer applied, and so is the whole state (`apply` is the only writer;
    before, the live queue was `Control`'s, which no event wrote)."""
    gate["hold"] = asyncio.Event()
    again = {"tool_calls": [call("hold", "h2")]}
    model = scripted({"tool_calls": [call("hold", "h1")]}, "one", "two", again)
    agent = Agent(model=model, tools=[hold])
    session = Session(agent)
    seen = recorded(monkeypatch, session)

    def check() -> None:
        folded = fold(seen, agent._by_name)
        assert session.queued == split(folded)
        assert folded == session.state

    session.steer("a")
    session.follow_up("b")
    session.steer("c")
    check()
    assert session.clear_queue("steer") == Queued(steering=("a", "c"))
    check()
    assert session.queued == Queued(follow_ups=("b",))
    run = session.run("go")
    async for event in run:
        if event.type == "tool:started":
            session.steer("mid-run")
            check()
            gate["hold"].set()
    check()
    injected = [e for e in seen if isinstance(e, ev.SteeringInjected)]
    assert [(e.mode, e.message.content) for e in injected] == [
        ("steer", "mid-run"),
        ("follow_up", "b"),
    ]
    assert session.queued == Queued()
    gate["hold"] = asyncio.Event()
    session.follow_up("dropped by the cancel")
    run = session.run("again")
    async for event in run:
        if event.type == "tool:started":  # (the run waits in the call)
            session.cancel()
            assert session.queued == Queued()
            check()
    check()
    assert [e.type for e in seen if "steering" in e.type][-2:] == [
        "steering:queued",
        "steering:cleared",
    ]


def test_history_is_the_conversation_and_the_views_are_derived():
    """`History` holds messages and their size (and their JSON, kept); carry-over and the queue are the state's, and
    the checkpoint and recovery are derived on each read (no field holds them)."""
    assert [f.name for f in fields(History)] == [
        "messages",
        "chars",
        "reported_tokens",
        "chars_at_report",
        "compacted_at",
        "encoded",  # (the JSON its snapshots keep: a cache, left out of comparisons)
        "customs",  # (how many of its messages are the app's custom ones: the request's view)
    ]
    assert [f.name for f in fields(History) if not f.compare] == ["encoded"]
    names = {f.name for f in fields(SessionState)}
    assert {"carry_over", "queued", "died"} <= names
    assert not {"checkpoint", "recovery"} & names
    state = SessionState()
    assert state.checkpoint is None and state.recovery is None
    state.died = True  # a run that died before its `done`, with nothing open: recovered
    assert state.recovery is not None and state.recovery.calls == []


async def test_a_steer_logged_elsewhere_reaches_a_durable_session_held_idle(tmp_path):
    """A script holds a durable session idle, steers it (kept in memory, not logged: its next
    run logs what it delivers), and meanwhile another process logs a steer for its next run
    (`Runtime.steer`): the next run, which reads the log again, delivers both (before, the
    log's steer stayed in the history's queue and no run ever delivered it)."""
    log = await open_log(tmp_path / "db")
    try:
        agent = Agent(name="held", model=scripted("one", "two", "three", "four"))
        key = SessionKey("default", "held", "s1")
        session = await open_session(agent, log, key.id)
        await drive(session.run("hi"))
        session.steer("from here")
        runtime = Runtime({agent.name: agent}, log)
        await runtime.steer(key, "from elsewhere")
        assert session.queued == Queued(steering=("from here",))
        result = await drive(session.run("go"))
        injected = [e.message.content for e in result.events if e.type == "steering:injected"]
        assert sorted(injected) == ["from elsewhere", "from here"]
        assert session.queued == Queued() and session.state.queued == []
        users = [m.content for m in session.messages if isinstance(m, UserMessage)]
        assert users[:2] == ["hi", "go"] and sorted(users[2:]) == injected
        await runtime.close()
    finally:
        await log.close()


def test_a_batch_opened_at_once_is_the_batch_the_class_makes() -> None:
    """`OpenBatch.of` (every reply with calls opens one) sets every field as `OpenBatch(calls)`
    does: a field added to the class and not to `of` fails here (unset, or shared)."""
    from loopwright.messages import ToolCall
    from loopwright.state.session_state import OpenBatch

    calls = [ToolCall(id="c1", name="ping", args={})]
    made, opened = OpenBatch(calls), OpenBatch.of(calls)
    assert opened == made and opened.checked == made.checked
    for f in fields(OpenBatch):
        value = getattr(opened, f.name)
        assert value == getattr(made, f.name)
        if f.name != "calls":  # a container of its own, not another batch's
            assert value is not getattr(OpenBatch.of(calls), f.name)
