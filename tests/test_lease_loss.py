"""A lost lease reaches the tools (issue 30, window 4): a run that loses its lease — a renewal
refused (another process took the session over) or not made in time (its process was paused, or
its event loop blocked, past the lease) — tells its calls in flight at once (`ctx.cancelled`),
starts no call, and ends fenced; the process that takes the session over never says a call
whose intent was logged "did not complete": it may have run, and the model is told so. A
subagent's run goes with its parent's (`runtime.fence`): claimed after its parent was taken over,
it never runs; paused before its parent died, it holds its parent's call; dead with a call
started, its own log says that call may have run. Clocks and heartbeats are injected; nothing
sleeps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from conftest import call, scripted
from loopwright import Agent, Approval, Rules, ToolContext, tool
from loopwright import events as ev
from loopwright.gate.decide import INTERRUPTED, MAY_HAVE_RUN
from loopwright.runtime import Settings
from loopwright.runtime.journal import session_in_log
from loopwright.store import StaleWriter
from loopwright.store.log import SessionKey
from loopwright.subagents import subagent_tool
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import KEY, Beats, Clock, Held, ended, never
from test_crash import read_log, work

TOLD = 30.0
"""How long a test waits for a tool to be told before it fails (it is told at once)."""


class Transfers:
    """A `transfer` tool running in a thread until its call is told to stop (`ctx.cancelled`):
    `entered` once it runs, `contexts` the contexts it ran with, `sent` the transfers it made."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.contexts: list[ToolContext] = []
        self.sent: list[int] = []

        @tool
        def transfer(n: int, ctx: ToolContext) -> str:
            """Transfer money."""
            self.contexts.append(ctx)
            self.entered.set()
            if ctx.cancelled.wait(TOLD):
                return "stopped before sending"
            self.sent.append(n)
            return f"sent {n}"

        self.tool = transfer

    def agent(self, model: Any) -> Agent:
        return Agent(name="payer", model=model, tools=[self.tool])

    def release(self) -> None:
        """(Test cleanup: no thread is left waiting.)"""
        for ctx in self.contexts:
            ctx.cancelled.set()


TRANSFER = {"tool_calls": [call("transfer", "t1", n=5)]}


async def taken_over(logs: Any, runtimes: Any, clock: Clock, transfers: Transfers) -> list[Any]:
    """Another process takes the session over (the lease has expired): the events it logged."""
    heir = runtimes({"payer": transfers.agent(scripted("carrying on"))}, await logs(clock))
    live = await heir.send("acme", "payer", "s1", "two")
    assert (await ended(live)).text == "carrying on"
    return [e for e in live.items if not e.type.endswith(":delta")]


def said(events: list[Any]) -> dict[str, str]:
    return {e.id: e.content for e in events if isinstance(e, ev.ToolOutput)}


async def test_a_process_paused_past_its_lease_tells_its_tool_as_it_wakes(logs, runtimes):
    """The process stops (SIGSTOP, a stalled machine) while its tool runs, past its lease; as
    it wakes, its heartbeat sees the lease's deadline passed and tells the call at once, before
    any renewal could be refused (another process may take the session over any moment). The
    process that takes it over says the call may have run. Before: the renewal, accepted as
    nobody had taken over yet, left the tool running, and the heir said it did not complete."""
    clock, beats, transfers = Clock(), Beats(), Transfers()
    log = await logs(clock)
    settings = Settings(sleep=beats.sleep, clock=clock)
    owner = await session_in_log(log, transfers.agent(scripted(TRANSFER, "done")), KEY, settings)
    running = asyncio.ensure_future(owner.run("go").result())
    try:
        assert await asyncio.to_thread(transfers.entered.wait, TOLD)
        clock.advance(31)  # paused past its lease; nobody has taken the session over yet
        await beats.beat()  # it wakes
        [ctx] = transfers.contexts
        assert await asyncio.to_thread(ctx.cancelled.wait, TOLD)  # told at once
        with pytest.raises(StaleWriter, match="deadline"):
            await running
    finally:
        transfers.release()
    logged = [s.event.type for s in await log.read(KEY)]
    assert logged[-2:] == ["actauth:decision", "tool:started"]  # nothing after the loss
    heir = await taken_over(logs, runtimes, clock, transfers)
    assert [e.type for e in heir[:4]] == [
        "session",
        "run:interrupted",
        "tool:interrupted",
        "tool:output",
    ]
    assert heir[1] == ev.RunInterrupted(interrupted_calls=["t1"], rerun_calls=[], carry_over=None)
    assert said(heir) == {"t1": MAY_HAVE_RUN}
    assert transfers.sent == []


async def test_a_call_about_to_start_after_its_lease_expired_never_starts(logs, runtimes):
    """The lease's deadline passed while the model answered (the heartbeat never woke: a
    blocked loop); the call's intent commits — nobody had taken the session over — but the
    run does not start its tool: it ends fenced. The process that takes the session over
    cannot know the tool did not run: it says the call may have run. Before: the tool ran."""
    clock, held, transfers = Clock(), Held(), Transfers()
    log = await logs(clock)
    settings = Settings(sleep=never, clock=clock)
    owner = await session_in_log(log, transfers.agent(held.model), KEY, settings)
    running = asyncio.ensure_future(owner.run("go").result())
    try:
        await held.asked.wait()
        clock.advance(31)  # past the lease's deadline, unrenewed
        held.give(TRANSFER)
        held.give("done")
        with pytest.raises(StaleWriter, match="deadline"):
            await running
    finally:
        transfers.release()
    assert not transfers.entered.is_set()  # never started
    logged = [s.event.type for s in await log.read(KEY)]
    assert logged[-2:] == ["actauth:decision", "tool:started"]
    heir = await taken_over(logs, runtimes, clock, transfers)
    assert said(heir) == {"t1": MAY_HAVE_RUN}


async def test_a_refused_renewal_tells_the_tool_in_flight(logs, runtimes):
    """Another process took the session over (the log's clock says the lease expired; this
    process's own clock does not: only the refusal tells it): the heartbeat's renewal is
    refused and the threaded call in flight sees `ctx.cancelled` at once."""
    log_clock, own_clock, beats, transfers = Clock(), Clock(), Beats(), Transfers()
    log = await logs(log_clock)
    settings = Settings(sleep=beats.sleep, clock=own_clock)
    owner = await session_in_log(log, transfers.agent(scripted(TRANSFER, "done")), KEY, settings)
    running = asyncio.ensure_future(owner.run("go").result())
    try:
        assert await asyncio.to_thread(transfers.entered.wait, TOLD)
        log_clock.advance(31)
        heir = await taken_over(logs, runtimes, log_clock, transfers)
        assert said(heir) == {"t1": MAY_HAVE_RUN}
        await beats.beat()  # refused: taken over
        [ctx] = transfers.contexts
        assert await asyncio.to_thread(ctx.cancelled.wait, TOLD)
        with pytest.raises(StaleWriter, match="taken over"):
            await running
    finally:
        transfers.release()
    assert transfers.sent == []


def test_a_call_whose_intent_was_logged_before_a_crash_may_have_run(tmp_path):
    """Killed right after the intent of `charge` committed (its sibling `fetch`, idempotent,
    not started yet): the next process cannot know whether `charge` ran, and says so; `fetch`
    never started, so it did not complete (the runtime knows it had no effect)."""
    crashed = work(tmp_path, "run", "cycle 1", crash="tool:started")
    assert crashed.returncode == 86, crashed.stderr[-2000:]
    after = work(tmp_path, "run", "continue 1")
    assert after.returncode == 0, after.stderr[-2000:]
    stored = [s.event for s in read_log(tmp_path)[0]]
    recovered = next(e for e in stored if isinstance(e, ev.RunInterrupted))
    assert recovered.interrupted_calls == ["charge-1", "fetch-1"]
    assert said(stored) == {"charge-1": MAY_HAVE_RUN, "fetch-1": INTERRUPTED}


DELEGATE = {"tool_calls": [call("billing", "b1", request="refund 5")]}


def delegating(sent: list[int], *child: Any, rules: Rules | None = None) -> Callable[..., Agent]:
    """`payer(*replies)`: a parent agent whose `billing` subagent answers `child` and refunds
    (each refund made is in `sent`)."""

    @tool
    async def refund(n: int) -> str:
        """Refund."""
        sent.append(n)
        return f"refunded {n}"

    def payer(*replies: Any) -> Agent:
        billing = Agent(
            name="billing",
            description="Refunds orders.",
            model=scripted(*child),
            tools=[refund],
            rules=rules,
        )
        return Agent(name="payer", model=scripted(*replies), tools=[subagent_tool(billing)])

    return payer


async def test_a_subagent_begun_after_its_parent_was_taken_over_never_runs(logs, runtimes):
    """The parent's run stalls between its subagent call's intent and the child's claim, past
    its lease (the log's clock says so; its own does not); another process takes the parent over
    — no child session exists yet, so none is fenced — and says the call may have run. The
    stalled run goes on: the child's session is claimed, but its parent's lease is checked next
    (a fenced renewal), refused: the child never runs, and the parent's run ends fenced.
    Before: the child ran, its tool's effect after the takeover."""
    log_clock, own_clock, sent = Clock(), Clock(), list[int]()
    payer = delegating(sent, {"tool_calls": [call("refund", "r1", n=5)]}, "refunded")
    log = await logs(log_clock)
    claiming, go_on, claim = asyncio.Event(), asyncio.Event(), log.claim

    async def stalled(key: Any, owner: str, **kw: Any) -> Any:
        if key.agent == "billing":  # (the process stalls as the child is about to be claimed)
            claiming.set()
            await go_on.wait()
        return await claim(key, owner, **kw)

    log.claim = stalled  # type: ignore[method-assign]
    settings = Settings(sleep=never, clock=own_clock)
    owner = await session_in_log(log, payer(DELEGATE, "done"), KEY, settings)
    running = asyncio.ensure_future(owner.run("go").result())
    await claiming.wait()
    log_clock.advance(31)  # past the parent's lease
    heir = runtimes({"payer": payer("carrying on")}, await logs(log_clock))
    live = await heir.send("acme", "payer", "s1", "two")
    assert (await ended(live)).text == "carrying on"
    assert said(live.items) == {"b1": MAY_HAVE_RUN}
    go_on.set()  # the stalled run goes on
    with pytest.raises(StaleWriter, match="taken over"):
        await running
    assert sent == []  # the child never ran
    child = SessionKey("acme", "billing", "s1/billing/b1")
    assert await log.read(child) == []
    assert (await log.session(child)).status == "idle"


def dies_at(log: Any, kind: type) -> tuple[asyncio.Event, list[asyncio.Future[int]]]:
    """The process dies as it first commits an event of `kind`: that commit never lands
    (`dying` is set); the test ends the dead process's run by failing the commit (`unlogged`)."""
    dying, append, unlogged = asyncio.Event(), log.append, list[asyncio.Future[int]]()

    def died(lease: Any, events: Any) -> Any:
        if not unlogged and any(isinstance(e, kind) for e in events):
            dying.set()
            unlogged.append(asyncio.get_running_loop().create_future())
            return unlogged[-1]
        return append(lease, events)

    log.append = died
    return dying, unlogged


async def test_a_subagent_paused_before_its_parent_died_holds_the_call(logs, runtimes):
    """The child pauses on an approval and lets its session go; the parent's process dies
    before logging its own pause. The item, listed open, is approved (the parent's lease still
    holds: nothing resumes yet). The next process takes the parent over: the child, paused,
    holds the parent's call — the dead run is logged paused on the child's item, decided, so
    the next message resumes it first, and the approved refund runs (P4). Before: the call was
    recovered (it may have run) and the approved refund never ran."""
    clock, sent = Clock(), list[int]()
    asked = Rules.from_yaml(
        "rules: [{name: refunds, tool: refund, decision: ask}]\ndefault_decision: allow"
    )
    payer = delegating(sent, {"tool_calls": [call("refund", "r1", n=5)]}, "refunded", rules=asked)
    log = await logs(clock)
    dying, unlogged = dies_at(log, ev.ToolSuspended)  # (its pause: never logged)
    owner = await session_in_log(log, payer(DELEGATE), KEY, Settings(sleep=never, clock=clock))
    running = asyncio.ensure_future(owner.run("go").result())
    try:
        await dying.wait()
        child = SessionKey("acme", "billing", "s1/billing/b1")
        assert (await log.session(child)).status == "paused"
        heir = runtimes({"payer": payer("done", "carrying on")}, await logs(clock))
        [item] = await heir.pending("acme")
        await heir.resolve("acme", item.id, Approval.approve(by="ops"))
        assert sent == []  # (the parent's lease holds: nothing resumed)
        clock.advance(31)  # the parent's lease expires
        live = await heir.send("acme", "payer", "s1", "two")
        done = await ended(live)
        assert sent == [5]  # the approved refund ran
        assert done.text == "carrying on"
        assert (await log.session(KEY)).status == "idle"
        assert await heir.pending("acme") == []
    finally:
        unlogged[0].set_exception(StaleWriter("taken over"))  # (the dead process's task ends)
        with pytest.raises(StaleWriter):
            await running


async def test_a_dead_subagents_started_call_says_it_may_have_run(logs, runtimes):
    """The parent's process dies while its subagent's tool runs (the child's intent logged, its
    result not). The next process takes the parent over: its call may have run, and so may
    the child's — the child's session, which no run goes on with, says so too: its batch is
    closed as a recovery closes one (P3). Before: the child's log kept a call started with no
    result, for ever."""
    clock, sent = Clock(), list[int]()
    payer = delegating(sent, {"tool_calls": [call("refund", "r1", n=5)]}, "refunded")
    log = await logs(clock)
    dying, unlogged = dies_at(log, ev.ToolOutput)  # (the child's result: never logged)
    owner = await session_in_log(log, payer(DELEGATE), KEY, Settings(sleep=never, clock=clock))
    running = asyncio.ensure_future(owner.run("go").result())
    try:
        await dying.wait()
        clock.advance(31)
        heir = runtimes({"payer": payer("carrying on")}, await logs(clock))
        live = await heir.send("acme", "payer", "s1", "two")
        assert (await ended(live)).text == "carrying on"
        assert said(live.items) == {"b1": MAY_HAVE_RUN}
        child = SessionKey("acme", "billing", "s1/billing/b1")
        stored = [s.event for s in await log.read(child)]
        assert [e.type for e in stored[-6:]] == [
            "tool:started",
            "session",
            "run:interrupted",
            "tool:interrupted",
            "tool:output",
            "tool:result",
        ]
        assert said(stored) == {"r1": MAY_HAVE_RUN}
        assert (await log.session(child)).status == "idle"
        assert sent == [5]  # (it ran once, before the crash)
    finally:
        unlogged[0].set_exception(StaleWriter("taken over"))  # (the dead process's task ends)
        with pytest.raises(StaleWriter):
            await running
