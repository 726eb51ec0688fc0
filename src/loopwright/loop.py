"""The loop: call the model, act on what it asks for, repeat (SPEC §3).

`run_loop` is one async generator of events; it reads top to bottom. Each thing it does is a
named step of `steps.Steps`, which holds the run's state, and policy lives in collaborators: the
gate (`permissions`, `decide`), the approver (`approvals`), the scheduler (`tools.ToolRunner`),
retries (`retry`), the budget (`budget`), compaction and the hooks. The generator is suspended
at every `yield`, so a consumer that persists an event (the store) has done so before the loop
goes on: `tool:started` is the intent, committed before the tool runs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .agent import Agent
from .approvals import Approver
from .budget import check_budget
from .compaction import compaction_due
from .decide import Batch
from .errors import describe
from .hooks import RunInfo, call_hook
from .messages import AssistantMessage, History
from .models import Model, ModelFailure
from .permissions import Gate
from .steps import Steps


@dataclass(slots=True)
class Control:
    """Signals from outside a run: steering and follow-up queues, and cancellation."""

    steering: deque[str] = field(default_factory=deque)
    follow_ups: deque[str] = field(default_factory=deque)
    cancelled: bool = False
    expired: bool = False
    """The model request in flight ran past its deadline (`RetryPolicy.deadline`)."""
    on_deadline: Callable[[], None] | None = None
    """Set by the driver of the run: lands the deadline where the loop waits (a `Run` cancels
    its task only while the loop awaits, never in the caller's code)."""


async def run_loop(
    agent: Agent,
    model: Model,
    gate: Gate,
    history: History,
    info: RunInfo,
    control: Control,
    *,
    input: str | None,
    approver: Approver | None = None,
    compact: bool = False,
    children: Any = None,
) -> AsyncGenerator[ev.Event, None]:
    """Run one input through the loop, yielding every event.

    1. `session`; the input (after any carry-over note) joins the history; steering is injected.
    2. Each step: stop at `max_turns`; `budget:check`; stream the reply (retrying within bounds).
    3. No tool calls: finish (unless follow-ups are queued or the stop hook goes on).
    4. Decide every call in model order; run the allowed ones concurrently; append results in
       call order. A denial skips the rest and stops (or is told to the model); a call with no
       live approver pauses the run once its siblings have run.
    5. Exactly one terminal loop event, then `done`.
    """
    run = Steps(agent, model, gate, history, info, control, approver, children)
    hooks = agent.hooks
    yield ev.Session(session_id=info.session_id)
    try:
        if hooks.on_run_start:
            await call_hook(hooks.on_run_start, info)
        if history.recovery is not None:
            async for event in run.recover(history.recovery):
                yield event
        if input is None and history.checkpoint is not None:
            async for event in run.resume(history.checkpoint):
                yield event
        for event in await run.start(input):
            yield event
        if compact:  # compaction on demand: nothing else happens in this run
            async for event in run.compact("manual"):
                yield event
            run.stop(ev.LoopDone(text=""), "", "completed")
        while run.terminal is None:
            if control.cancelled:
                raise asyncio.CancelledError
            if run.step >= agent.max_turns:
                text = f"Stopped after {agent.max_turns} turns without a final answer."
                run.stop(ev.LoopMaxTurns(max_turns=agent.max_turns), text, "max_turns")
                break
            # -- request
            run.step += 1
            yield ev.StepStarted(step=run.step)
            check = check_budget(history, run.budget)
            yield check
            reason = compaction_due(agent.compaction, check, run.step)
            if reason is not None:
                async for event in run.compact(reason):
                    yield event
            # -- stream (failures: retried within bounds, or a too-long prompt compacted once)
            reply: AssistantMessage | None = None
            failures = 0
            while reply is None:
                request = await run.request(check)
                failure = None
                try:
                    with run.deadline:
                        async for item in run.model_for(request).stream(request):
                            if type(item) is ev.TextDelta:
                                run.partial.append(item.delta)
                            elif isinstance(item, ModelFailure):
                                failure = item  # the stream's last item: let it finish
                                continue
                            elif isinstance(item, ev.MessageCompleted):
                                reply = item.message
                            yield item
                except asyncio.CancelledError:
                    failure = run.expired()  # the request's deadline passed: a failure
                if failure is not None and reply is None:
                    async for event in run.after_failure(failure, failures):
                        yield event
                    failures += 1
            calls = await run.accept(reply)
            # -- finish, or decide and execute
            if not calls:
                for event in await run.finish(reply):
                    yield event
            else:
                if reply.text:
                    yield ev.AssistantText(text=reply.text)
                batch = Batch()
                async for event in run.decide(reply, calls, batch):
                    yield event
                async for event in run.execute(batch, calls):
                    yield event
            yield ev.StepFinished(step=run.step, usage=reply.usage)
            # -- continue
            if calls and run.terminal is None:
                for event in await run.proceed(reply):
                    yield event
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        for event in run.interrupt():
            yield event
        control.cancelled = False
        control.steering.clear()
        control.follow_ups.clear()
        run.stop(
            ev.LoopAborted(reason="cancelled", carry_over=history.carry_over),
            "Cancelled.",
            "aborted",
        )
    except Exception as exc:
        for event in run.interrupt():
            yield event
        run.stop(ev.LoopError(error=describe(exc)), f"Error: {describe(exc)}", "error")
    if agent.hooks.on_run_end:
        try:
            await call_hook(agent.hooks.on_run_end, info, run.stop_reason)
        except Exception as exc:
            run.stop(ev.LoopError(error=describe(exc)), f"Error: {describe(exc)}", "error")
    assert run.terminal is not None
    yield run.terminal
    yield ev.Done(text=run.text, stop_reason=run.stop_reason)
