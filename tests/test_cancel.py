"""Cancellation owned by the run, and tools off the loop: a cancel never lets a call start that
had not, never calls a finished call unfinished, and never lies about a thread that runs on
(its real outcome follows as `tool:late_result`); sync tools run in worker threads (unless
`inline=True`), so a blocking one stalls no other session and its timeout applies. Tests
synchronise on events the tools set, never on time (the deadline tests give the clock a bound
the model never meets)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent, scripted, verify
from loopwright import Agent, Hooks, RetryPolicy, Session, tool
from loopwright import events as ev
from loopwright.loop.calls import NOT_RUN, STILL_RUNNING, STOPPED
from loopwright.messages import UserMessage
from loopwright.testing import types
from loopwright.tools import ToolContext
from runtime_fixtures import releases_held

BOUND = 30.0  # a safety bound for threads and handshakes that a failing test would hang on


def after(events: list[ev.Event], kind: str) -> list[str]:
    """Event types after the first event of `kind`."""
    names = types(events)
    return names[names.index(kind) + 1 :]


def outputs(events: list[ev.Event]) -> dict[str, str]:
    return {e.id: e.content for e in events if isinstance(e, ev.ToolOutput)}


def late(events: list[ev.Event]) -> list[tuple[str, str]]:
    return [(e.id, e.content) for e in events if isinstance(e, ev.ToolLateResult)]


async def until(event: threading.Event) -> None:
    """Wait, off the loop, until a tool's thread sets `event`."""
    assert await asyncio.to_thread(event.wait, BOUND)


def recorder(ran: list[int]) -> Any:
    @tool
    def record(n: int) -> str:
        """Records that it ran."""
        ran.append(n)
        return f"ran {n}"

    return record


def holder(entered: threading.Event, release: threading.Event) -> Any:
    @tool
    def hold() -> str:
        """Blocks its thread until the test releases it."""
        entered.set()
        return "released" if release.wait(BOUND) else "never released"

    return hold


ABORTED_PAIRS = [
    *["tool:interrupted", "tool:output", "tool:result"] * 2,
    *["step:finished", "loop:aborted", "done"],
]


# ---- a cancel starts nothing -------------------------------------------------------------------


async def test_a_cancel_while_the_reader_holds_a_decision_starts_no_call():
    ran: list[int] = []
    model = scripted({"tool_calls": [call("record", "a", n=1), call("record", "b", n=2)]}, "no")
    session = Session(Agent(model=model, tools=[recorder(ran)]))
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "actauth:decision" and types(events).count(event.type) == 1:
            session.cancel()
    verify(events)
    assert ran == []
    assert after(events, "message:completed") == [
        "actauth:decision",
        "actauth:decision",
        "tool:started",
        "tool:started",
        *ABORTED_PAIRS,
    ]
    assert outputs(events) == {"a": NOT_RUN, "b": NOT_RUN}
    assert len(model.requests) == 1


async def test_a_cancel_from_a_before_tool_hook_starts_no_call():
    ran: list[int] = []
    session: Session

    def cancel_first(info: Any, c: Any) -> None:
        if c.id == "a":
            session.cancel()  # inside the run's own task: it lands before anything starts

    model = scripted({"tool_calls": [call("record", "a", n=1), call("record", "b", n=2)]}, "no")
    agent = Agent(model=model, tools=[recorder(ran)], hooks=Hooks(before_tool=cancel_first))
    session = Session(agent)
    result = await drive(session.run("go"))
    assert ran == []
    assert after(result.events, "message:completed") == [
        "actauth:decision",
        "actauth:decision",
        *ABORTED_PAIRS,
    ]
    assert outputs(result.events) == {"a": NOT_RUN, "b": NOT_RUN}


async def test_finished_calls_keep_their_results_and_a_running_thread_reports_late():
    """Cancelled once `b` has its result and `a` runs in its thread: `b` keeps its real
    result, `a` says it was still running, and what `a` did follows when it finishes."""
    ran: list[int] = []
    entered, release = threading.Event(), threading.Event()
    model = scripted({"tool_calls": [call("hold", "a"), call("record", "b", n=2)]}, "no")
    session = Session(Agent(model=model, tools=[holder(entered, release), recorder(ran)]))
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:result" and event.id == "b":
            await until(entered)
            session.cancel()
        if event.type == "tool:output" and event.id == "a":
            release.set()
    verify(events)
    assert ran == [2]
    assert outputs(events) == {"a": STILL_RUNNING, "b": "ran 2"}
    assert after(events, "tool:result")[-7:] == [
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "tool:late_result",
        "loop:aborted",
        "done",
    ]
    assert late(events) == [("a", "released")]
    assert [m.content for m in session.messages[-2:]] == [STILL_RUNNING, "ran 2"]


async def test_a_thread_sees_the_cancel_in_its_context():
    entered, release = threading.Event(), threading.Event()

    @tool
    def watch(ctx: ToolContext) -> str:
        """Works until it is told to stop, then tidies up until released."""
        entered.set()
        told = ctx.cancelled.wait(BOUND)
        release.wait(BOUND)
        return "stopped when told" if told else "never told"

    session = Session(Agent(model=scripted({"tool_calls": [call("watch", "w")]}), tools=[watch]))
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            await until(entered)
            session.cancel()
        if event.type == "tool:output":
            release.set()
    verify(events)
    assert outputs(events) == {"w": STILL_RUNNING}
    assert late(events) == [("w", "stopped when told")]


async def test_an_async_call_stopped_while_it_ran_says_so():
    entered = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Waits for what never comes."""
        entered.set()
        await asyncio.Event().wait()
        return "impossible"

    session = Session(
        Agent(model=scripted({"tool_calls": [call("wait_forever", "w")]}), tools=[wait_forever])
    )
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            await entered.wait()
            session.cancel()
    verify(events)
    assert outputs(events) == {"w": STOPPED}
    assert types(events)[-6:] == [
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]


async def test_a_steer_then_a_cancel_drops_the_steer():
    never = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits."""
        await never.wait()
        return "impossible"

    model = scripted({"tool_calls": [call("wait", "w")]}, "again")
    session = Session(Agent(model=model, tools=[wait]))
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "message:completed":
            session.steer("change of plan")
            session.follow_up("and then this")
            session.cancel()
    verify(events)
    assert "steering:injected" not in types(events) and len(model.requests) == 1
    await drive(session.run("next"))
    said = [m.content for m in model.requests[1].messages if isinstance(m, UserMessage)]
    assert said == ["go", "next"]


async def test_a_cancel_after_the_run_paused_drops_the_steer_in_the_log_too(tmp_path: Path):
    """A cancel that lands once the run has decided to pause leaves the pause standing; what
    was queued is dropped, in memory and in the log (`steering:cleared`), so no resume, in
    this process or from the log, delivers it."""
    from loopwright import Approval, Rules
    from loopwright.runtime import open_session
    from loopwright.store import open_log

    @tool
    def refund(amount: int) -> str:
        """Refund."""
        return "refunded"

    held: list[Any] = []

    def steer_then_cancel(info: Any, stop_reason: str) -> None:  # (the run decided to pause)
        session, run = held
        session.steer("refund 5000 instead")
        run.cancel()

    def agent(*replies: Any, hooks: Hooks | None = None) -> Agent:
        rules = Rules.from_yaml("rules: [{name: asked, tool: refund, decision: ask}]")
        model = scripted(*replies)
        return Agent(name="till", model=model, tools=[refund], rules=rules, hooks=hooks or Hooks())

    log = await open_log(tmp_path / "db.sqlite")
    try:
        paying = agent(
            {"tool_calls": [call("refund", "r", amount=5)]},
            hooks=Hooks(on_run_end=steer_then_cancel),
        )
        session = await open_session(paying, log)
        run = session.run("refund")
        held[:] = [session, run]
        events = [event async for event in run]
        verify(events)
        assert types(events)[-2:] == ["loop:paused", "done"] and not session.queued
        again = await open_session(agent("ok"), log, session.id)  # as another process would
        assert not again.queued
        await again.resolve(again.pending[0].id, Approval.approve())
        result = await again.resume().result()
    finally:
        await log.close()
    assert result.stop_reason == "completed" and "steering:injected" not in types(result.events)


async def test_a_cancel_while_a_durable_run_releases_its_lease_drops_the_queue_in_the_log(
    tmp_path: Path,
):
    """Past its `done` a run is over: a cancel while it releases its lease stops nothing, but
    what was queued for the next run is dropped, in memory as in the log (`steering:cleared`,
    logged under a lease of its own once the run let its lease go): read again from the log,
    the session has nothing queued (issue 30, window 6: the steer landed in the next run)."""
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey, open_log

    log = await open_log(tmp_path / "db.sqlite")
    agent = Agent(name="a", model=scripted("first", "second"))
    try:
        with releases_held(log) as (releasing, go_on):
            session = await open_session(agent, log)
            run = session.run("hi")

            async def read() -> None:
                async for event in run:
                    if event.type == "done":
                        session.steer("later")

            reader = asyncio.create_task(read())
            await releasing.wait()
            session.cancel()
            assert not session.queued and not run.cancelled
            go_on.set()
            await reader
            await session.idle()
            await session.journal.flushed()  # type: ignore[union-attr]
        stored = [s.event for s in await log.read(SessionKey("default", "a", session.id))]
        assert [e.type for e in stored][-3:] == ["done", "steering:queued", "steering:cleared"]
        assert stored[-1] == ev.SteeringCleared(mode=None)
        again = await open_session(agent, log, session.id)
        assert not again.queued and again.state.queued == []
        result = await drive(again.run("next"))
        assert "steering:injected" not in types(result.events)
        assert (await log.session(SessionKey("default", "a", session.id))).status == "idle"
    finally:
        await log.close()


async def test_a_steer_to_a_durable_run_closing_its_log_is_refused(tmp_path: Path):
    """Past its `done`, a durable run lets its lease go and can log nothing more: a steer
    then is refused (`SessionBusy`), never taken in memory only (lost to a crash or to
    another process); once the run has ended, it waits for the next run."""
    from loopwright.errors import SessionBusy
    from loopwright.runtime import open_session
    from loopwright.store import open_log

    log = await open_log(tmp_path / "db.sqlite")
    try:
        with releases_held(log) as (releasing, go_on):
            held_session: list[Any] = []
            hooks = Hooks(on_run_end=lambda info, reason: held_session[0].steer("kept"))
            agent = Agent(name="a", model=scripted("first", "second"), hooks=hooks)
            session = await open_session(agent, log)
            held_session.append(session)
            ending = asyncio.create_task(session.run("hi").result())
            await releasing.wait()
            with pytest.raises(SessionBusy, match="closing its log"):  # (its lease is let go)
                session.steer("later")
            with pytest.raises(SessionBusy, match="closing its log"):
                session.clear_queue()
            assert session.queued.steering == ("kept",)  # (taken before its `done`, logged)
            go_on.set()
            assert (await ending).stop_reason == "completed"
    finally:
        await log.close()


async def test_a_second_task_reading_a_run_is_told_so_and_the_first_reads_on():
    """A run has one reader: a second task waiting for its events raised nothing and waited
    forever (one wake-up slot); it now fails at once, and the first reader gets every event."""
    never = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits until the test lets it go."""
        await never.wait()
        return "let go"

    model = scripted({"tool_calls": [call("wait", "w")]}, "done")
    run = Session(Agent(model=model, tools=[wait])).run("go")
    started = asyncio.Event()
    seen: list[str] = []

    async def first() -> None:
        async for event in run:
            seen.append(event.type)
            if event.type == "tool:started":
                started.set()

    reading = asyncio.create_task(first())
    await started.wait()  # (the first reader waits for the tool's result now)
    async with asyncio.timeout(BOUND):  # (a safety net: it used to wait forever)
        with pytest.raises(RuntimeError, match="one reader"):
            await run.__anext__()
    never.set()
    await reading
    assert seen[-2:] == ["loop:done", "done"] and "tool:result" in seen


async def test_a_run_read_to_its_end_gives_its_result_and_a_later_cancel_changes_nothing():
    """`result()` after the events were all read gives how the run ended (with no events: the
    reader had them); a cancel once the run is past its `done` has nothing left to stop."""
    session = Session(Agent(model=scripted("hello")))
    run = session.run("hi")
    seen = []
    async for event in run:
        seen.append(event)
        if event.type == "done":
            run.cancel()
    result = await run.result()
    assert (result.text, result.stop_reason, result.events) == ("hello", "completed", [])
    assert types(seen)[-2:] == ["loop:done", "done"]


async def test_a_run_cancelled_before_it_started_does_nothing():
    model = scripted("never asked")
    session = Session(Agent(model=model, hooks=Hooks(on_run_start=lambda info: 1 / 0)))
    run = session.run("go")
    run.cancel()
    result = await drive(run)
    assert types(result.events) == ["session", "loop:aborted", "done"]
    assert model.requests == [] and session.messages == []


async def test_a_reader_cancelled_while_it_waits_cancels_the_run():
    session = Session(Agent(model=scripted({"stall": 3600})))
    run = session.run("go")
    seen: list[str] = []
    asked = asyncio.Event()

    async def read() -> None:
        async for event in run:
            seen.append(event.type)
            if event.type == "budget:check":
                asked.set()

    reader = asyncio.create_task(read())
    await asked.wait()
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    rest = await run.result()
    assert types(rest.events) == ["step:finished", "loop:aborted", "done"]
    assert not session.busy


async def test_closing_a_run_that_another_task_reads_ends_both():
    session = Session(Agent(model=scripted({"stall": 3600})))
    run = session.run("go")
    seen: list[str] = []
    asked = asyncio.Event()

    async def read() -> None:
        async for event in run:
            seen.append(event.type)
            if event.type == "budget:check":
                asked.set()

    reader = asyncio.create_task(read())
    await asked.wait()
    await run.aclose()  # while the reader waits for the next event
    await reader
    assert seen == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "step:finished",
        "loop:aborted",
        "done",
    ]
    assert not session.busy


# ---- deadlines -------------------------------------------------------------------------------


async def test_a_request_past_its_deadline_fails_retryably_in_the_run_not_in_the_reader():
    """The reader is busy with its first event (it awaits the journal seeing the retry) while
    the deadline passes: its own await is not cancelled; the request is retried."""
    retried = asyncio.Event()

    class Watch:
        async def begin(self, session: Any, input: Any) -> None:
            pass

        async def end(self, session: Any, stop_reason: Any) -> None:
            pass

        def seq_of(self, event):
            return None

        async def append(self, session_id: str, event: ev.Event) -> None:
            if event.type == "model:retry":
                retried.set()

    agent = Agent(
        model=scripted({"stall": 3600}, "done"), retry=RetryPolicy(deadline=0.05, backoff=0)
    )
    events = []
    async for event in Session(agent, journal=Watch()).run("go"):
        if not events:
            await retried.wait()  # would raise CancelledError if the deadline landed here
        events.append(event)
    verify(events)
    assert events[-1].text == "done"
    assert [e.error for e in events if isinstance(e, ev.ModelRetry)] == [
        "no complete reply within 0.05s"
    ]


# ---- where tools run --------------------------------------------------------------------------


async def test_sync_tools_run_in_threads_and_inline_ones_on_the_loop():
    @tool
    def threaded() -> str:
        """Where it runs."""
        return threading.current_thread().name

    @tool(inline=True)
    def inline() -> str:
        """Where it runs."""
        asyncio.get_running_loop()  # only the loop's own thread has one
        return threading.current_thread().name

    model = scripted(
        {"tool_calls": [call("threaded", "t")]}, {"tool_calls": [call("inline", "i")]}, "ok"
    )
    result = await run_agent(Agent(model=model, tools=[threaded, inline]))
    found = outputs(result.events)
    assert (
        found["t"].startswith("loopwright-tool") and found["i"] == threading.current_thread().name
    )


async def test_a_blocking_sync_tool_does_not_stall_other_sessions():
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    @tool
    def slow() -> str:
        """Blocks its thread (as time.sleep would) until released."""
        entered.set()
        release.wait(BOUND)
        order.append("the blocking tool returned")
        return "slow done"

    busy = Session(Agent(model=scripted({"tool_calls": [call("slow")]}, "after"), tools=[slow]))
    blocked = asyncio.create_task(busy.run("go").result())
    await until(entered)
    other = await run_agent(Agent(model=scripted("hello")))  # while the tool still blocks
    order.append(f"another session answered {other.text!r}")
    release.set()
    assert (await blocked).text == "after"
    assert order == ["another session answered 'hello'", "the blocking tool returned"]


async def test_blocking_calls_of_one_batch_each_get_a_thread():
    """Five calls that can only finish together (a barrier of five): each runs in a thread of
    its own at once, although the pool starts its threads only as calls wait for one."""
    barrier = threading.Barrier(5, timeout=BOUND)

    @tool
    def meet(n: int) -> str:
        """Waits until all five calls have arrived."""
        return f"{n} met {barrier.wait()}"

    calls = [call("meet", f"m{n}", n=n) for n in range(5)]
    model = scripted({"tool_calls": calls}, "after")
    result = await run_agent(Agent(model=model, tools=[meet]))
    found = outputs(result.events)
    assert sorted(found) == [f"m{n}" for n in range(5)]
    assert sorted(int(text.rpartition(" ")[2]) for text in found.values()) == [0, 1, 2, 3, 4]


async def test_a_sync_tool_times_out_and_reports_what_it_did_later():
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Blocks until released."""
        return "finally done" if release.wait(BOUND) else "never released"

    model = scripted({"tool_calls": [call("stuck", "s")]}, "after")
    agent = Agent(model=model, tools=[stuck], tool_timeout=0.05)
    events = []
    async for event in Session(agent).run("go"):
        events.append(event)
        if event.type == "tool:output":
            release.set()
    verify(events)
    assert outputs(events) == {
        "s": "Tool 'stuck' timed out after 0.05s. It is still running in its thread and may yet "
        "do its work; its outcome is recorded if it finishes before this run ends."
    }
    assert late(events) == [("s", "finally done")]
    assert types(events)[-4:] == ["step:finished", "tool:late_result", "loop:done", "done"]


async def test_a_thread_past_the_grace_is_logged_not_awaited():
    entered, release = threading.Event(), threading.Event()
    logged = asyncio.Event()
    records: list[str] = []

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())
            logged.set()  # on the loop's thread: the late outcome lands there first

    handler = Seen()
    logging.getLogger("loopwright.tools").addHandler(handler)
    try:
        hold = holder(entered, release)
        agent = Agent(
            model=scripted({"tool_calls": [call("hold", "h")]}), tools=[hold], tool_grace=0
        )
        session = Session(agent)
        events = []
        async for event in session.run("go"):
            events.append(event)
            if event.type == "tool:started":
                await until(entered)
                session.cancel()
        verify(events)
        assert outputs(events) == {"h": STILL_RUNNING} and late(events) == []
        release.set()
        await logged.wait()
    finally:
        logging.getLogger("loopwright.tools").removeHandler(handler)
    assert records == ["tool hold (call h) finished after its run had ended: released"]


async def test_a_durable_run_logs_the_late_result_before_it_ends(tmp_path: Path):
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey, open_log

    log = await open_log(tmp_path / "db.sqlite")
    entered, release = threading.Event(), threading.Event()
    agent = Agent(
        model=scripted({"tool_calls": [call("hold", "h")]}, "after"),
        tools=[holder(entered, release)],
    )
    session = await open_session(agent, log, "s")
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            await until(entered)
            session.cancel()
        if event.type == "tool:output":
            release.set()
    verify(events)
    key = SessionKey("default", agent.name, "s")
    stored = [e.event for e in await log.read(key)]
    assert stored == [e for e in events if not e.type.endswith(":delta")]
    assert types(stored)[-3:] == ["tool:late_result", "loop:aborted", "done"]
    assert (await log.session(key)).status == "idle"
    again = await open_session(agent, log, "s")
    assert again.messages == session.messages
    await log.close()


async def test_steering_is_refused_while_a_cancelled_run_ends():
    """A cancel drops what is queued; a steer or follow-up sent while the cancelled run still
    waits for a thread is refused (`SessionBusy`), not kept by the session alone (its log
    drops it with the cancel). Once the run has ended they are queued for the next run."""
    from loopwright.errors import SessionBusy

    entered, release = threading.Event(), threading.Event()

    @tool
    def stubborn(ctx: ToolContext) -> str:
        """Ignore the stop signal until released."""
        entered.set()
        release.wait(BOUND)
        return "finished"

    model = scripted({"tool_calls": [call("stubborn", "s1")]}, "next")
    session = Session(Agent(model=model, tools=[stubborn]))
    events: list[ev.Event] = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            await asyncio.to_thread(entered.wait, BOUND)
            session.cancel()
            for send in (session.steer, session.follow_up):
                with pytest.raises(SessionBusy, match="was cancelled and is ending"):
                    send("too late")
            release.set()
    assert events[-1].stop_reason == "aborted" and session.queued.steering == ()
    assert late(events) == [("s1", "finished")]
    session.steer("now")
    assert session.queued.steering == ("now",)


@pytest.mark.parametrize("kind", ["async", "inline", "threaded"])
@pytest.mark.parametrize("by", ["a sibling", "after_tool"])
async def test_a_call_that_had_not_started_never_starts_after_cancel_returned(kind, by):
    """A cancel made while a batch runs (by a call of the batch, or by an `after_tool` hook of
    one that finished) reaches the calls that have not started: none of them starts after
    `cancel()` returned, whatever kind of tool it is, and each says so."""
    ledger: list[str] = []
    session: Session

    def cancel() -> None:
        session.cancel()
        ledger.append("cancel() returned")

    @tool
    async def first() -> str:
        """Cancel the run (a sibling) or finish (the hook cancels)."""
        if by == "a sibling":
            cancel()
        return "first done"  # (in the step it started in: the sibling has not started yet)

    def charge() -> str:
        """Charge a card."""
        ledger.append("charged")
        return "charged"

    second = tool(charge, inline=True) if kind == "inline" else tool(charge)
    if kind == "async":

        @tool(name="charge")
        async def second() -> str:
            """Charge a card."""
            return charge()

    def after_tool(info: Any, call: Any, outcome: Any) -> None:
        if call.id == "a" and by == "after_tool":
            cancel()

    model = scripted({"tool_calls": [call("first", "a"), call("charge", "b")]}, "unused")
    agent = Agent(model=model, tools=[first, second], hooks=Hooks(after_tool=after_tool))
    session = Session(agent)
    result = await drive(session.run("go"))
    assert ledger == ["cancel() returned"]
    assert outputs(result.events)["b"] == NOT_RUN and result.stop_reason == "aborted"


@pytest.mark.parametrize("batch", [1, 2])
async def test_a_tools_own_cancelled_error_is_a_failure_the_model_reads(batch):
    """An async tool that awaited a task someone else cancelled raises `CancelledError` of its
    own: the run is not being cancelled, so that is the tool's failure, an error result (the
    run went on waiting for it before)."""

    @tool
    async def fetch() -> str:
        """Await a task that gets cancelled."""
        inner = asyncio.ensure_future(asyncio.Event().wait())
        asyncio.get_running_loop().call_soon(inner.cancel)
        return await inner

    @tool
    async def other() -> str:
        """Answer."""
        return "fine"

    calls = [call("fetch", "f1"), call("other", "o1")][:batch]
    model = scripted({"tool_calls": calls}, "recovered")
    result = await asyncio.wait_for(run_agent(Agent(model=model, tools=[fetch, other])), BOUND)
    assert result.stop_reason == "completed" and result.text == "recovered"
    expected = {"f1": "Tool 'fetch' failed: CancelledError", "o1": "fine"}
    assert outputs(result.events) == dict(list(expected.items())[:batch])
