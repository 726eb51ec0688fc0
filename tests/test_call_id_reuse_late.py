"""A call id used again in a later step (the OpenAI dialect falls back to `call_<index>`) while
the thread of the earlier call with that id runs on: each call is tracked as itself, the run
waits for both threads, and a `tool:late_result` goes out only for the call the stream's id
names (the later one); the earlier call's outcome goes to the operator's log. Tests synchronise
on events the tools and the log set, never on time."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import call, scripted, verify
from loopwright import Agent, Session, tool
from loopwright import events as ev

BOUND = 30.0  # a safety bound for threads that a failing test would hang on
TIMED_OUT = (
    "Tool 'slow' timed out after 0.05s. It is still running in its thread and may yet "
    "do its work; its outcome is recorded if it finishes before this run ends."
)


class Releases(logging.Handler):
    """Records the `loopwright.tools` log, and releases the second thread once the first
    thread's outcome is logged."""

    def __init__(self, release: dict[int, threading.Event]) -> None:
        super().__init__()
        self.releases = release  # (not `release`: a Handler's lock method)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())
        if "finished after a later call took its id" in record.getMessage():
            self.releases[2].set()


@pytest.fixture
def release() -> Iterator[dict[int, threading.Event]]:
    events = {1: threading.Event(), 2: threading.Event()}
    yield events
    for event in events.values():  # a failing test leaves no thread waiting
        event.set()


@pytest.fixture
def logged(release: dict[int, threading.Event]) -> Iterator[Releases]:
    handler = Releases(release)
    logger = logging.getLogger("loopwright.tools")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def agent_for(release: dict[int, threading.Event]) -> Agent:
    @tool
    def slow(n: int) -> str:
        """Blocks until released (in a worker thread)."""
        return f"slow {n} done" if release[n].wait(BOUND) else f"slow {n} never released"

    model = scripted(
        {"tool_calls": [call("slow", "call_0", n=1)]},
        {"tool_calls": [call("slow", "call_0", n=2)]},
        "end",
    )
    return Agent(model=model, tools=[slow], tool_timeout=0.05)


async def run_releasing_the_first(session: Session, release: dict[int, threading.Event]) -> list:
    """The run's events; the first thread is released once the second call has its result (the
    second thread is released when the first one's outcome is logged)."""
    events: list[ev.Event] = []
    outputs = 0
    async for event in session.run("go"):
        events.append(event)
        if isinstance(event, ev.ToolOutput):
            outputs += 1
            if outputs == 2:
                release[1].set()
    return events


def late(events: list[ev.Event]) -> list[tuple[str, str]]:
    return [(e.id, e.content) for e in events if isinstance(e, ev.ToolLateResult)]


async def test_the_late_result_of_a_call_whose_id_was_reused_is_logged_and_the_run_waits_for_both(
    release: dict[int, threading.Event], logged: Releases
):
    events = await run_releasing_the_first(Session(agent_for(release)), release)
    verify(events)
    assert [(e.id, e.content) for e in events if isinstance(e, ev.ToolOutput)] == [
        ("call_0", TIMED_OUT),
        ("call_0", TIMED_OUT),
    ]
    assert late(events) == [("call_0", "slow 2 done")]  # the second call's: the id names it now
    assert logged.records == [
        "tool slow (call call_0) finished after a later call took its id: slow 1 done"
    ]
    assert events[-1] == ev.Done(stop_reason="completed", text="end")


async def test_a_durable_run_logs_only_the_late_result_of_the_call_the_id_names(
    tmp_path: Path, release: dict[int, threading.Event], logged: Releases
):
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey, open_log

    log = await open_log(tmp_path / "db.sqlite")
    try:
        agent = agent_for(release)
        session = await open_session(agent, log, "s")
        events = await run_releasing_the_first(session, release)
        verify(events)
        stored = [e.event for e in await log.read(SessionKey("default", agent.name, "s"))]
        assert stored == [e for e in events if not e.type.endswith(":delta")]
        verify(stored)
        assert late(stored) == [("call_0", "slow 2 done")]
        assert logged.records == [
            "tool slow (call call_0) finished after a later call took its id: slow 1 done"
        ]
        again = await open_session(agent, log, "s")
        assert again.messages == session.messages
    finally:
        await log.close()


async def test_a_late_result_never_names_a_later_call_that_has_not_started(
    release: dict[int, threading.Event], logged: Releases
):
    """The later reply used the id for a call that waits for an approval (it has not started):
    the earlier call's late result would name it, so it goes to the log only."""
    from loopwright import Rules

    @tool
    def refund(amount: int) -> str:
        """Refund."""
        return "refunded"

    base = agent_for(release)
    model = scripted(
        {"tool_calls": [call("slow", "call_0", n=1)]},
        {"tool_calls": [call("refund", "call_0", amount=5)]},
    )
    rules = Rules.from_yaml(
        "default_decision: allow\nrules: [{name: r, tool: refund, decision: ask}]"
    )
    agent = Agent(model=model, tools=[*base.tools, refund], tool_timeout=0.05, rules=rules)
    events: list[ev.Event] = []
    async for event in Session(agent).run("go"):
        events.append(event)
        if event.type == "approval:pending":
            release[1].set()  # the run, pausing, waits for the thread (its grace)
    verify(events)
    assert late(events) == [] and events[-1].stop_reason == "paused"
    assert logged.records == [
        "tool slow (call call_0) finished after a later call took its id: slow 1 done"
    ]
