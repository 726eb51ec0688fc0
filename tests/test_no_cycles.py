"""A session that is done with is freed by reference counting alone: nothing of a run is left in
a reference cycle for the collector (whose full collections cost about 11 ms each with 200
sessions at once, more than half of what running them costs)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from conftest import call, scripted
from loopwright import Agent, Session, tool
from loopwright.errors import UnknownPending
from loopwright.runtime import Runtime, open_session
from loopwright.store import open_log
from loopwright.store.log import EventLog
from loopwright.store.sqlite_log import SQLiteLog


@tool(inline=True)
def inline_ping(i: int) -> str:
    """Answer on the loop."""
    return f"pong {i}"


@tool
def threaded_ping(i: int) -> str:
    """Answer from a worker thread."""
    return f"pong {i}"


def agent_with(ping: object, name: str) -> Agent:
    model = scripted({"tool_calls": [call(name, "c1", i=1)]}, "done")
    return Agent(model=model, tools=[ping])


async def drained(session: Session) -> None:
    assert (await session.run("go").result()).text == "done"


async def iterated(session: Session) -> None:
    async with session.run("go") as run:
        assert [e.type async for e in run][-1] == "done"


async def waited(session: Session) -> None:
    result = asyncio.ensure_future(session.run("go").result())
    await session.idle()  # returns once the run is over: idle() watched it
    assert result.done() and result.result().text == "done"


Once = Callable[[int], Awaitable[object]]


@pytest.fixture
def left_by() -> Iterator[Callable[[Once], Awaitable[list[str]]]]:
    """`await left_by(once)`: the kinds of object that `once(1)`, `once(2)` and `once(3)` left
    unreachable, after `once(0)` made what is made once (the tool pool; the event loop of the
    test before, let go with the last job of it); the collector is off meanwhile, so that
    nothing else collects them first."""

    def collected() -> list[str]:
        gc.set_debug(gc.DEBUG_SAVEALL)  # (kept in gc.garbage instead of freed: seen, then freed)
        gc.collect()
        kinds = [type(o).__name__ for o in gc.garbage]
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()
        return kinds

    async def left(once: Once) -> list[str]:
        await once(0)
        collected()
        for n in (1, 2, 3):
            await once(n)
        return collected()

    gc.collect()
    gc.disable()
    try:
        yield left
    finally:
        gc.enable()


@pytest.mark.parametrize("drive", [drained, iterated, waited])
@pytest.mark.parametrize(
    ("ping", "name"), [(inline_ping, "inline_ping"), (threaded_ping, "threaded_ping")]
)
async def test_a_finished_session_leaves_no_cycle(
    left_by: Callable[[Once], Awaitable[list[str]]],
    drive: Callable[[Session], Awaitable[None]],
    ping: object,
    name: str,
) -> None:
    agent = agent_with(ping, name)
    assert await left_by(lambda n: drive(Session(agent))) == []


@tool
def threaded_boom(i: int) -> str:
    """Fail in a worker thread."""
    raise ValueError(f"boom {i}")


@tool(inline=True)
def inline_boom(i: int) -> str:
    """Fail on the loop."""
    raise ValueError(f"boom {i}")


@tool
async def async_boom(i: int) -> str:
    """Fail in a coroutine."""
    raise ValueError(f"boom {i}")


@pytest.mark.parametrize(
    ("boom", "name"),
    [(threaded_boom, "threaded_boom"), (inline_boom, "inline_boom"), (async_boom, "async_boom")],
)
async def test_a_tool_that_raises_leaves_no_cycle(
    left_by: Callable[[Once], Awaitable[list[str]]],
    boom: object,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The error is the model's to read (`Tool '...' failed: ...`); its traceback, which holds
    the frames of the call, is let go with it. (The failure is logged with its traceback: here
    to no handler, as pytest's would keep the records, and with them the error.)"""
    tools_log = logging.getLogger("loopwright.tools")
    monkeypatch.setattr(tools_log, "propagate", False)
    monkeypatch.setattr(tools_log, "handlers", [logging.NullHandler()])
    agent = agent_with(boom, name)
    assert await left_by(lambda n: drained(Session(agent))) == []


@tool
async def stalls(i: int) -> str:
    """Wait until cancelled."""
    await asyncio.Event().wait()
    return "never"


async def test_a_cancelled_run_leaves_no_cycle(
    left_by: Callable[[Once], Awaitable[list[str]]],
) -> None:
    """Cancelled while its call runs (in a task group): the run ends `loop:aborted`, and
    nothing of it is left for the collector."""
    agent = agent_with(stalls, "stalls")

    async def cancelled(n: int) -> None:
        async with Session(agent).run("go") as run:
            seen = []
            async for event in run:
                seen.append(event.type)
                if event.type == "tool:started":
                    run.cancel()
        assert seen[-2:] == ["loop:aborted", "done"]

    assert await left_by(cancelled) == []


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new SQLite file, or a new PostgreSQL database (tests/pg_cluster.py)."""
    if request.param == "sqlite":
        return str(tmp_path / "log.db")
    return str(request.getfixturevalue("pg_url"))


async def test_a_session_kept_in_a_log_leaves_no_cycle(
    left_by: Callable[[Once], Awaitable[list[str]]], where: str
) -> None:
    """Opened through the runtime on a log (a new session: the log does not hold it), run,
    and let go: its journal lets it go as the run ends."""
    agent = agent_with(inline_ping, "inline_ping")
    log = await open_log(where)

    async def kept(n: int) -> None:
        await drained(await open_session(agent, log, f"s{n}"))

    try:
        assert await left_by(kept) == []
    finally:
        await log.close()


async def test_an_error_a_log_hands_back_leaves_no_cycle(
    left_by: Callable[[Once], Awaitable[list[str]]], where: str
) -> None:
    """An item the log does not hold (a 404 of the HTTP API): the error comes back from the
    log's call made on the event loop, its worker thread (SQLite) or its pool's task
    (PostgreSQL), and nothing of it is left for the collector."""
    logs = [await open_log(where)]
    if isinstance(logs[0], SQLiteLog):
        logs.append(SQLiteLog(where, inline_appends=False))  # every call on its worker

    try:
        for log in logs:

            async def missing(n: int, log: EventLog = log) -> None:
                with pytest.raises(UnknownPending):
                    await log.pending_item("default", f"apr_missing{n}")

            assert await left_by(missing) == []
    finally:
        for log in logs:
            await log.close()


async def test_runs_of_the_runtime_leave_no_cycle(
    left_by: Callable[[Once], Awaitable[list[str]]], tmp_path: Path
) -> None:
    """Runs the runtime service drives (as the HTTP server's are), on new sessions: once a run
    is over and its session is no longer kept, nothing of it is left for the collector."""
    agent = agent_with(inline_ping, "inline_ping")
    log = await open_log(tmp_path / "log.db")
    runtime = Runtime({"pinger": agent}, log)

    async def sent(n: int) -> None:
        live = await runtime.send("default", "pinger", None, "go")
        done = await live.wait()
        assert done is not None and done.text == "done"
        await live.task  # (and what the runtime does after it)
        runtime._idle.clear()  # (the sessions it keeps for their next runs, let go)

    try:
        assert await left_by(sent) == []
    finally:
        await runtime.close()
        await log.close()
