"""The loop: call the model, act on what it asks for, repeat (SPEC §3).

`run_loop` is one async generator of events; it reads top to bottom. Each thing it does is a
named step of `steps.Steps`, which holds the run's state, and policy lives in collaborators: the
gate (`permissions`, `decide`), the approver (`approvals`), the scheduler (`runner`),
retries (`retry`), the budget (`budget`), compaction and the hooks. The generator is suspended
at every `yield`, so a driver that persists an event (`driver.Run` with a store) has done so
before the loop goes on: `tool:started` is the intent, committed before the tool runs. The
driver also applies each event to the session's state (`replay.apply`) before the loop goes on:
the loop changes the history only by yielding events.
Cancellation is the driving task's: it lands where the loop awaits (model, tools, a human) and
the loop ends with `loop:aborted`; the model's deadline is an `asyncio.timeout` (`retry.Deadline`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from itertools import chain

from .. import events as ev
from ..gate.batch import Batch, Checkpoint
from ..messages import Recovery, UserMessage
from ..state._values import maker
from ..state.compaction import compaction_due
from .budget import check_budget, read_budget
from .hook_calls import observe
from .steps import Steps


async def run_loop(
    steps: Callable[[], Steps], input: str | UserMessage | None, compact: bool = False
) -> AsyncGenerator[ev.Event, None]:
    """Run one input through the loop, yielding every event (each step of it: `Steps`, made as
    the run starts: its session's state is read then)."""
    run = steps()
    agent, state, info = run.agent, run.state, run.info
    opening = begin(run, input, compact)  # (before `session`, which takes over what it reads)
    try:
        yield session_event(session_id=info.session_id)
        if opening is None:  # the input and steering: all most runs open with
            for event in await run.start(input):
                yield event
        else:
            async for event in opening:
                yield event
        while run.terminal is None and run.step < (agent := run.agent).max_turns:  # (a handoff's)
            yield run.started()
            yield (check := check_budget(state.history, run.budget, agent))
            if (reason := compaction_due(agent.compaction, check, run.step, state)) is not None:
                async for event in run.compact(reason):
                    yield event
            while run.reply is None:  # failures: retried within bounds, or the prompt compacted
                try:
                    async for item in await run.request(check):  # (its deadline started)
                        if (item := run.streamed(item)) is not None:
                            yield item
                except BaseException as exc:
                    if not await run.deadline.stop(exc):  # (past it: a retryable failure)
                        raise
                if not run.deadline.done():  # expired as it completed: exit it all the same
                    await run.deadline.stop()
                if run.reply is None:
                    async for event in run.after_failure():
                        yield event
            if agent.hooks.transform_reply is not None:  # (the reply held till now: changed?)
                for event in await run.transform():
                    yield event
            reply, calls = run.accept()
            if agent.hooks.after_reply is not None:
                for event in await observe(agent.hooks, "after_reply", info, reply):
                    yield event
            if calls and (lone := run.lone(calls, reply, batch := Batch())) is not None:
                for event in lone:  # one call nothing can hold, decided at once: run as below
                    yield event
                for event in chain(await run.runner.lone(batch.scheduled), run.ran(batch, calls)):
                    yield event
            elif calls:  # decided in model order, then run
                async for event in run.execute(batch, calls, reply):
                    yield event
            yield run.finished()
            for event in await run.proceed(reply, calls):  # steering, follow-ups, or the end
                yield event
    except (asyncio.CancelledError, Exception) as exc:
        for event in run.ended_by(exc):  # what it left open closed; aborted, or `loop:error`
            yield event
    finally:
        run.deadline.close()  # (its timer, armed once a run)
    for event in await run.wind_down():  # late results, the run-end hook, the terminal, `done`
        yield event


def begin(
    run: Steps, input: str | UserMessage | None, compact: bool
) -> AsyncIterator[ev.Event] | None:
    """The run's opening after `session`, when it is more than `Steps.start` (None): the
    model's window read from its server, the run-start hook, a dead run's batch closed or a
    paused one resumed, the input and steering, and a compaction on demand (all that run does)."""
    state, hook = run.state, run.agent.hooks.on_run_start
    recovery, checkpoint = state.recovery, state.checkpoint  # (`session` ends them)
    plain = hook is None and recovery is None and not compact
    plain = plain and not hasattr(run.model, "read_context_window")
    if plain and (input is not None or checkpoint is None):
        return None
    return _opening(run, input, compact, recovery, checkpoint)


async def _opening(
    run: Steps,
    input: str | UserMessage | None,
    compact: bool,
    recovery: Recovery | None,
    checkpoint: Checkpoint | None,
) -> AsyncIterator[ev.Event]:
    if hasattr(run.model, "read_context_window"):  # its server says its window (once a model)
        run.budget = await read_budget(run.agent, run.model)
    if run.agent.hooks.on_run_start is not None:
        for event in await observe(run.agent.hooks, "on_run_start", run.info):
            yield event
    if recovery is not None:
        async for event in run.recover(recovery):
            yield event
    if input is None and checkpoint is not None:
        async for event in run.resume(checkpoint):
            yield event
    for event in await run.hand_off() if run.agent._handoffs else ():  # (a batch's transfer)
        yield event
    for event in await run.start(input):
        yield event
    if compact:  # nothing else happens in this run
        async for event in run.compact("manual"):
            yield event
        run.stop(ev.LoopDone(text=""), "", "completed")


session_event = maker(ev.Session)  # (see `_values.maker`)
