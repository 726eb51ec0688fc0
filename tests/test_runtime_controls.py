"""The runtime's cancel, steer and follow-up for a run in another process (two runtimes on one
SQLite file): they reach the run through the log's controls and it applies them as its own; a
steer whose run ended before taking it waits in the session for its next run; one that a run
holding the session does not take in time is withdrawn and refused."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from conftest import call
from log_conformance import safely
from loopwright import Agent, tool
from loopwright.errors import SessionBusy
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import KEY, Held, ended, logged


def two(logs_made: list[Any], runtimes: Any, held: Held) -> tuple[Any, Any]:
    agent = Agent(name="payer", model=held.model)
    return runtimes({"payer": agent}, logs_made[0]), runtimes({"payer": agent}, logs_made[1])


async def test_a_run_elsewhere_is_steered_and_followed_up(logs, runtimes) -> None:
    held = Held()
    here, elsewhere = two([await logs(), await logs()], runtimes, held)
    live = await here.send("acme", "payer", "s1", "first")
    await held.asked.wait()
    await elsewhere.steer(KEY, "mind the budget")  # returns once the run logged it
    await elsewhere.follow_up(KEY, "and say goodbye")
    queued = [s.event for s in await here.log.read(KEY) if s.event.type == "steering:queued"]
    assert [(e.mode, e.text) for e in queued] == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]
    held.give("noted")  # the steering, then (as the run would stop) the follow-up
    held.give("within budget")
    held.give("bye")
    assert (await ended(live)).text == "bye"
    injected = [e for e in live.items if e.type == "steering:injected"]
    assert [(e.mode, e.message.content) for e in injected] == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]


async def test_a_run_elsewhere_is_cancelled(logs, runtimes) -> None:
    held = Held()
    here, elsewhere = two([await logs(), await logs()], runtimes, held)
    live = await here.send("acme", "payer", "s1", "first")
    await held.asked.wait()
    assert await elsewhere.cancel_run(KEY) is True  # it ended cancelled
    done = await ended(live)
    assert done.stop_reason == "aborted"
    assert (await logged(here.log, KEY))[-2:] == ["loop:aborted", "done"]
    assert await elsewhere.cancel_run(KEY) is False  # no run holds the session now
    assert await here.cancel_run(KEY) is False


async def test_a_steer_whose_run_ended_first_waits_for_the_next_run(logs, runtimes) -> None:
    held = Held()
    bare = await logs()  # a writer that never listens for controls
    here, elsewhere = two([await logs(), await logs()], runtimes, held)
    lease = (await bare.claim(KEY, "a run that ends", ttl=30)).lease
    sent = asyncio.Event()
    send = elsewhere.log.send_control

    async def sending(*args: Any) -> Any:
        control = await send(*args)
        sent.set()
        return control

    elsewhere.log.send_control = sending
    steering = asyncio.ensure_future(elsewhere.steer(KEY, "for the next run"))
    await safely(sent.wait())
    await bare.release(lease, "idle")  # it ended without taking the steer
    await safely(steering)  # logged for the session's next run instead
    assert (await logged(here.log, KEY)) == ["steering:queued"]
    held.give("ok")
    live = await here.send("acme", "payer", "s1", "hello")
    await ended(live)
    injected = [e for e in live.items if e.type == "steering:injected"]
    assert [(e.mode, e.message.content) for e in injected] == [("steer", "for the next run")]


async def test_a_steer_not_taken_in_time_is_withdrawn(logs, runtimes) -> None:
    held = Held()
    bare = await logs()
    _, elsewhere = two([await logs(), await logs()], runtimes, held)
    lease = (await bare.claim(KEY, "a run that never listens", ttl=30)).lease
    with pytest.raises(SessionBusy, match="did not take the steer in time"):
        await elsewhere.steer(KEY, "too late", wait=0.05)
    assert await elsewhere.cancel_run(KEY, wait=0.05) is False  # nor a cancel: withdrawn
    later = await elsewhere.log.send_control(KEY, "steer", "taken")
    taking = bare.controls(lease)
    assert await safely(anext(taking)) == later  # the withdrawn ones never come
    await taking.aclose()


class Stubborn:
    """Two runtimes on one log; `here` runs a tool that ignores its stop signal until
    `release` is set, and `live` is that run once the tool has started."""

    def __init__(self, logs: Any, runtimes: Any) -> None:
        self.logs, self.runtimes = logs, runtimes
        self.entered, self.release = threading.Event(), threading.Event()

    async def start(self) -> None:
        entered, release = self.entered, self.release

        @tool
        def stubborn() -> str:
            """Ignore the stop signal until released."""
            entered.set()
            release.wait(30)
            return "finished"

        held = Held()
        agent = Agent(name="payer", model=held.model, tools=[stubborn])
        self.here = self.runtimes({"payer": agent}, await self.logs())
        self.elsewhere = self.runtimes({"payer": agent}, await self.logs())
        held.give({"tool_calls": [call("stubborn", "s1")]})
        self.live = await self.here.send("acme", "payer", "s1", "go")
        await asyncio.to_thread(entered.wait, 30)


async def test_a_steer_from_elsewhere_as_a_cancelled_run_ends_is_refused(logs, runtimes) -> None:
    """A steer sent from another process while a cancelled run waits for a thread is refused
    there as here (`SessionBusy`), not answered as queued and then dropped by the cancel."""
    run = Stubborn(logs, runtimes)
    await run.start()
    live = run.live
    applied = asyncio.Event()
    apply = live.apply
    live.apply = lambda control: (apply(control), applied.set())
    live.session.cancel()  # the run now waits for the thread (its grace)
    steering = asyncio.ensure_future(run.elsewhere.steer(KEY, "too late"))
    await safely(applied.wait())
    run.release.set()
    with pytest.raises(SessionBusy, match="was cancelled before it took the steer"):
        await safely(steering)
    assert (await ended(live)).stop_reason == "aborted"
    assert "steering:queued" not in await logged(run.here.log, KEY)


async def test_a_steer_the_run_elsewhere_took_but_never_logged_is_refused(logs, runtimes) -> None:
    """Taken, but not logged by the sender's wait (its run refused it as a cancel ends it, and
    is still ending): `SessionBusy`, never an answer that it was queued."""
    run = Stubborn(logs, runtimes)
    await run.start()
    run.live.session.cancel()
    try:
        with pytest.raises(SessionBusy, match="took the steer but did not log it in time"):
            await run.elsewhere.steer(KEY, "too late", wait=0.5)
    finally:
        run.release.set()
    assert (await ended(run.live)).stop_reason == "aborted"
    assert "steering:queued" not in await logged(run.here.log, KEY)
