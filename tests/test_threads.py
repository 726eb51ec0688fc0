"""The pool that sync tools run in: a call given up on while its thread runs on (a tool that
ignores its stop signal) no longer holds a place in the pool, so the calls after it run."""

from __future__ import annotations

import asyncio
import threading

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Session, tool
from loopwright.loop import threads
from loopwright.loop.threads import Flag, Job, _Pool

BOUND = 30.0  # a safety bound for a failing test that would otherwise hang


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> _Pool:
    small = _Pool(1)
    monkeypatch.setattr(threads, "_pool", small)
    return small


async def test_a_thread_given_up_on_makes_room_for_the_next_call(pool: _Pool):
    started, release = threading.Event(), threading.Event()
    stuck = threads.submit(lambda: (started.set(), release.wait(BOUND)), {}, Flag())
    assert await asyncio.to_thread(started.wait, BOUND)
    waiting = threads.submit(lambda: "ran", {}, Flag())
    assert (pool.threads, pool.backlog) == (1, 1)  # the one place is taken: it waits
    assert stuck.cancel() is False  # running on: given up on, its place is free
    await asyncio.wait_for(waiting.future, BOUND)
    assert waiting.result() == "ran" and (pool.threads, pool.abandoned) == (1, 1)
    release.set()
    await asyncio.wait_for(stuck.future, BOUND)
    assert stuck.result() == (None, True) and (pool.threads, pool.abandoned, pool.idle) == (1, 0, 1)


async def test_a_job_cancelled_before_it_starts_or_after_it_returned_frees_nothing(pool: _Pool):
    done = threads.submit(lambda: 1, {}, Flag())
    await asyncio.wait_for(done.future, BOUND)
    assert done.cancel() is False and (pool.threads, pool.abandoned) == (1, 0)
    queued = Job(lambda: 2, {}, Flag())  # never handed to a worker
    assert queued.cancel() is True and (pool.threads, pool.abandoned) == (1, 0)


async def test_a_cancelled_runs_stubborn_thread_does_not_stall_the_next_session(pool: _Pool):
    entered, release = threading.Event(), threading.Event()

    @tool
    def stubborn() -> str:
        """Ignore the stop signal until released."""
        entered.set()
        release.wait(BOUND)
        return "late"

    @tool
    def quick() -> str:
        """Answer at once."""
        return "quick"

    first = Session(
        Agent(
            model=scripted({"tool_calls": [call("stubborn", "s1")]}, "x"),
            tools=[stubborn],
            tool_grace=0,  # (its run does not wait for the thread's late result)
        )
    )
    async with first.run("go") as run:
        async for event in run:
            if event.type == "tool:started":
                await asyncio.to_thread(entered.wait, BOUND)
                break  # leaving cancels the run: its thread runs on, given up on
    second = Session(
        Agent(model=scripted({"tool_calls": [call("quick", "q1")]}, "done"), tools=[quick])
    )
    result = await asyncio.wait_for(drive(second.run("go")), BOUND)
    assert result.stop_reason == "completed"
    assert [e.content for e in result.events if e.type == "tool:output"] == ["quick"]
    release.set()
