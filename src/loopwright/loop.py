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
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from ._values import maker
from .agent import Agent
from .approvals import Approver
from .budget import check_budget
from .compaction import compaction_due
from .decide import Batch
from .errors import describe
from .hook_calls import observe
from .hooks import RunInfo
from .messages import AssistantMessage, UserMessage
from .models import Model, ModelFailure
from .permissions import Gate
from .replay import SessionState
from .retry import Deadline
from .steps import Steps
from .threads import Signal


@dataclass(slots=True)
class Control:
    """What reaches a run from outside: steering and follow-up queues, and the stop signals of
    its calls in flight (`ToolContext.cancelled`)."""

    # (lists: an empty deque takes 760 bytes, a block of 64 slots; an empty list 56)
    steering: list[str] = field(default_factory=list)
    follow_ups: list[str] = field(default_factory=list)
    signals: set[Signal] = field(default_factory=set)

    def cancel(self) -> bool:
        """Drop what is queued (True if anything was) and tell the calls in flight, at once: a
        thread cannot be cancelled, and a job still waiting for a thread must never start."""
        dropped = bool(self.steering or self.follow_ups)
        self.steering.clear()
        self.follow_ups.clear()
        for signal in self.signals:
            signal.set()
        return dropped


async def run_loop(
    agent: Agent,
    model: Model,
    gate: Gate,
    state: SessionState,
    info: RunInfo,
    control: Control,
    *,
    input: str | UserMessage | None,
    approver: Approver | None = None,
    compact: bool = False,
    children: Any = None,
) -> AsyncGenerator[ev.Event, None]:
    """Run one input through the loop, yielding every event.

    1. `session`; the input (after any carry-over note) joins the history; steering is injected.
    2. Each step: stop at `max_turns`; `budget:check`; stream the reply (retrying within bounds).
    3. Decide every call in model order; run the allowed ones concurrently; append results in
       call order. A denial skips the rest and stops (or is told to the model); a call with no
       live approver pauses the run once its siblings have run. Every step finishes.
    4. Steering is injected; with no tool calls (or all said `terminate`) the run finishes
       unless a follow-up is queued or the stop hook goes on.
    5. Late results of threads given up on (in a grace), exactly one terminal event, then `done`.
    """
    run = Steps(agent, model, gate, state, info, control, approver, children)
    hooks, history = agent.hooks, state.history
    recovery, checkpoint = history.recovery, history.checkpoint  # `session` takes them over
    deadline = Deadline(agent.retry.deadline)  # each model request's
    try:
        yield session_event(session_id=info.session_id)
        if hooks.on_run_start is not None:
            for event in await observe(hooks, "on_run_start", info):
                yield event
        if recovery is not None:
            async for event in run.recover(recovery):
                yield event
        if input is None and checkpoint is not None:
            async for event in run.resume(checkpoint):
                yield event
        for event in await run.start(input):
            yield event
        if compact:  # compaction on demand: nothing else happens in this run
            async for event in run.compact("manual"):
                yield event
            run.stop(ev.LoopDone(text=""), "", "completed")
        while run.terminal is None:
            if run.step >= agent.max_turns:
                text = f"Stopped after {agent.max_turns} turns without a final answer."
                run.stop(ev.LoopMaxTurns(max_turns=agent.max_turns), text, "max_turns")
                break
            # -- request
            yield run.started()
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
                await deadline.start()
                try:
                    async for item in run.model_for(request).stream(request):
                        if type(item) is ev.TextDelta:
                            run.partial.append(item.delta)
                        elif isinstance(item, ModelFailure):
                            failure = item  # the stream's last item: let it finish
                            continue
                        elif isinstance(item, ev.MessageCompleted):
                            item = run.received(item)  # malformed calls made data
                            reply = item.message
                        yield item
                except BaseException as exc:
                    if not await deadline.stop(exc):
                        raise
                    failure = run.expired()  # past the request's deadline: a retryable failure
                else:
                    if not deadline.done():  # expired as it completed: exit it all the same
                        await deadline.stop()
                if failure is not None and reply is None:
                    async for event in run.after_failure(failure, failures):
                        yield event
                    failures += 1
            calls = run.accept(reply)
            if hooks.after_reply is not None:
                for event in await observe(hooks, "after_reply", info, reply):
                    yield event
            # -- decide and execute
            if calls:
                if reply.text:
                    yield ev.AssistantText(text=reply.text)
                batch = Batch()
                for call in calls:  # in model order: the hook, the gate, for `ask` a human
                    events, pending = await run.decide(reply, call, batch)
                    for event in events:
                        yield event
                    if pending is not None:
                        async for event in run.decider.ask(pending, batch):
                            yield event
                async for event in run.execute(batch, calls):
                    yield event
            yield run.finished()
            # -- continue with steering, or finish (unless a follow-up is queued)
            if run.terminal is None:
                for event in await run.proceed(reply, calls):
                    yield event
    except asyncio.CancelledError:
        for event in run.interrupt(cancelled=True):
            yield event
        run.abort()
    except Exception as exc:
        for event in run.interrupt():
            yield event
        run.stop(ev.LoopError(error=describe(exc)), f"Error: {describe(exc)}", "error")
    finally:
        deadline.close()  # (its timer, armed once a run)
    for event in await run.wind_down():
        yield event
    assert run.terminal is not None
    yield run.terminal
    yield done_event(text=run.text, stop_reason=run.stop_reason)


session_event, done_event = maker(ev.Session), maker(ev.Done)  # (see `_values.maker`)
