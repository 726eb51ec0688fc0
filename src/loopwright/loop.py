"""The loop: call the model, act on what it asks for, repeat (SPEC §3).

`run_loop` is one async generator of events. Policy lives in named collaborators: the gate
(`permissions`, `decide`), the approver (`approvals`), the scheduler (`tools.ToolRunner`), retries
(`retry`), the budget (`budget`) and the hooks. The generator is suspended at every
`yield`, so a consumer that persists an event (the store) has done so before the loop goes on:
`tool:started` is the intent, committed before the tool runs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .agent import Agent
from .approvals import ApprovalRequest, Approver
from .budget import check_budget, context_budget
from .compaction import CompactionReason, compact, compaction_due
from .decide import INTERRUPTED, Batch, Checkpoint, Decider, Recovery, Suspended
from .errors import describe
from .hooks import Block, RunInfo, Stop, call_hook
from .messages import AssistantMessage, History, ToolCall, ToolResultMessage, UserMessage
from .models import Model, ModelFailure, ModelRequest, ToolSpec, get_model
from .permissions import Gate
from .retry import ModelFailed, next_retry, partial_note
from .tools import Outcome, Scheduled, ToolContext, ToolRunner


@dataclass(slots=True)
class Control:
    """Signals from outside a run: steering and follow-up queues, and cancellation."""

    steering: deque[str] = field(default_factory=deque)
    follow_ups: deque[str] = field(default_factory=deque)
    cancelled: bool = False


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
    run = _Run(agent, model, gate, history, info, control, approver, children)
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
                async for item in run.model_for(request).stream(request):
                    if type(item) is ev.TextDelta:
                        run.partial.append(item.delta)
                    elif isinstance(item, ModelFailure):
                        failure = item  # the stream's last item: let it finish and close
                        continue
                    elif isinstance(item, ev.MessageCompleted):
                        reply = item.message
                    yield item
                if failure is not None:
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


@dataclass(slots=True)
class _Run:
    agent: Agent
    model: Model
    gate: Gate
    history: History
    info: RunInfo
    control: Control
    approver: Approver | None
    children: Any = None
    tools: dict[str, Any] = field(default_factory=dict)
    specs: tuple[ToolSpec, ...] = ()
    scope: ev.Scope = field(init=False)
    decider: Decider = field(init=False)
    runner: ToolRunner = field(init=False)
    step: int = 0
    budget: int = 100_000
    may_shrink: bool = True
    partial: list[str] = field(default_factory=list)
    open_calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, ToolResultMessage] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    terminal: ev.Terminal | None = None
    text: str = ""
    stop_reason: ev.RunStopReason = "completed"

    def __post_init__(self) -> None:
        self.tools = self.agent._by_name
        self.specs = self.agent.tool_specs
        self.scope = ev.Scope(
            tenant=self.info.tenant, environment=self.info.environment, agent=self.info.agent
        )
        self.budget = context_budget(self.agent, self.model)
        self.decider = Decider(
            self.tools, self.gate, self.scope, self.info.session_id, self.approver, self.result
        )
        agent = self.agent
        self.runner = ToolRunner(
            self.tool_context,
            self.outcomes,
            agent.tool_concurrency,
            agent.tool_timeout,
            agent.max_tool_output,
            self.after_tool if agent.hooks.after_tool else None,
        )

    async def compact(self, reason: CompactionReason) -> AsyncIterator[ev.Event]:
        async for event in compact(self.history, self.model, self.agent.compaction, reason):
            yield event

    def model_for(self, request: ModelRequest) -> Model:
        return get_model(request.model) if request.model is not None else self.model

    async def after_failure(self, failure: ModelFailure, failures: int) -> AsyncIterator[ev.Event]:
        """A request failed: compact a prompt too long (once), or wait and retry within the
        policy's bounds (SPEC §3.8), or give up with the failure."""
        if failure.prompt_too_long and self.may_shrink:
            async for event in self.shrink():
                yield event
            return
        retry = next_retry(self.agent.retry, failure, failures)
        if retry is None:
            raise ModelFailed(failure.error)
        yield retry
        await asyncio.sleep(retry.delay)

    async def shrink(self) -> AsyncIterator[ev.Event]:
        """The provider said the prompt is too long: compact once, then the request is retried."""
        self.may_shrink = False
        before = len(self.history.messages)
        async for event in self.compact("prompt_too_long"):
            yield event
        yield ev.PromptCompaction(from_=before, to=len(self.history.messages))

    def stop(self, terminal: ev.Terminal, text: str, reason: ev.RunStopReason) -> None:
        self.terminal, self.text, self.stop_reason = terminal, text, reason

    # ---- start and steering -------------------------------------------------------------

    async def start(self, text: str | None) -> list[ev.Event]:
        """The carry-over note, the input (unless the prompt hook blocks it), steering."""
        hooks, history = self.agent.hooks, self.history
        events: list[ev.Event] = []
        if history.carry_over:
            note = UserMessage(
                content="[Your previous reply was interrupted. What you had "
                f"written so far:]\n{history.carry_over}"
            )
            history.carry_over = None
            history.append(note)
            events.append(ev.InputReceived(message=note))
        if text is not None:
            extra = await call_hook(hooks.on_prompt, self.info, text) if hooks.on_prompt else None
            if isinstance(extra, Block):
                reason = f"input blocked: {extra.reason}"
                self.stop(ev.LoopTerminated(reason=reason), extra.reason, "terminated")
                return events
            message = UserMessage(content=f"{text}\n\n{extra}" if extra else text)
            history.append(message)
            events.append(ev.InputReceived(message=message))
        return events + self.inject(self.control.steering, self.agent.steering, "steer")

    def inject(self, queue: deque[str], mode: str, kind: Any) -> list[ev.Event]:
        if not queue:
            return []
        count = len(queue) if mode == "all" else 1
        injected: list[ev.Event] = []
        for _ in range(count):
            message = UserMessage(content=queue.popleft())
            self.history.append(message)
            injected.append(ev.SteeringInjected(message=message, mode=kind))
        return injected

    # ---- one step -------------------------------------------------------------------------

    async def request(self, check: ev.BudgetCheck) -> ModelRequest:
        """This step's request; text a failed attempt had streamed rides along as a note."""
        agent = self.agent
        notes = (check.nudge.content,) if check.nudge else ()
        if self.partial:
            notes = (*notes, partial_note(self.partial))
        request = ModelRequest(
            system=agent.instructions,
            messages=self.history.messages,
            tools=self.specs,
            notes=notes,
            max_output_tokens=agent.max_output_tokens,
        )
        if agent.hooks.before_request:
            request = await call_hook(agent.hooks.before_request, self.info, request) or request
        return request

    async def accept(self, reply: AssistantMessage) -> list[ToolCall]:
        """The reply is complete: it joins the history; its calls are now open."""
        self.partial.clear()
        self.history.append(reply)
        self.history.note_usage(reply.usage)
        if self.agent.hooks.after_reply:
            await call_hook(self.agent.hooks.after_reply, self.info, reply)
        self.open_calls = calls = reply.tool_calls
        return calls

    async def proceed(self, reply: AssistantMessage) -> list[ev.Event]:
        """After a batch: the continuation policy may stop; steering is delivered."""
        if self.agent.hooks.continuation:
            verdict = await call_hook(self.agent.hooks.continuation, self.info, reply)
            if isinstance(verdict, Stop):
                self.stop(ev.LoopTerminated(reason=verdict.reason), verdict.reason, "terminated")
                return []
        return self.inject(self.control.steering, self.agent.steering, "steer")

    async def finish(self, reply: AssistantMessage) -> list[ev.Event]:
        """The model answered without tools: stop, unless there is more to say to it."""
        queued = self.inject(self.control.steering, self.agent.steering, "steer")
        queued += self.inject(self.control.follow_ups, self.agent.follow_up, "follow_up")
        if not queued and self.agent.hooks.on_stop:
            more = await call_hook(self.agent.hooks.on_stop, self.info, reply.text)
            if more:
                self.control.follow_ups.appendleft(more)
                queued = self.inject(self.control.follow_ups, "one", "follow_up")
        if not queued:
            self.stop(ev.LoopDone(text=reply.text), reply.text, "completed")
        return queued

    async def decide(
        self, reply: AssistantMessage, calls: list[ToolCall], batch: Batch
    ) -> AsyncIterator[ev.Event]:
        """Every call in model order, through the hook, the gate and, for `ask`, a human.
        A reply cut off by the output limit never runs its calls: each gets an error."""
        if reply.stop_reason == "max_tokens":
            cut = "Not run: the reply was cut off by the output limit, so it may be incomplete."
            for call in calls:
                for event in self.result(call, cut, "Error."):
                    yield event
            return
        before_tool = self.agent.hooks.before_tool
        for call in calls:
            verdict = await call_hook(before_tool, self.info, call) if before_tool else None
            events, pending = self.decider.check(call, verdict, batch)
            for event in events:
                yield event
            if pending is not None:
                async for event in self.decider.ask(pending, batch):
                    yield event

    async def resume(self, checkpoint: Checkpoint) -> AsyncIterator[ev.Event]:
        """Finish a paused batch with the humans' answers, then let the run go on."""
        self.history.checkpoint = None
        self.open_calls, batch = checkpoint.calls, Batch()
        self.results.update(checkpoint.results)
        closed = Batch()
        for pending in checkpoint.pending.values():
            if pending.decision is None:  # closed by a sibling's denial
                closed.deferred[pending.request.id] = pending
                continue
            assert pending.resolved_at is not None
            for event in self.decider.decide_human(
                pending, pending.decision, pending.resolved_at, batch
            ):
                yield event
        for event in self.decider.rerun(checkpoint, closed if checkpoint.closed else batch):
            yield event
        if closed.deferred or closed.scheduled:
            closed.denied = batch.denied
            for event in self.decider.skip(closed):
                yield event
        async for event in self.execute(batch, checkpoint.calls):
            yield event

    async def recover(self, recovery: Recovery) -> AsyncIterator[ev.Event]:
        """Close the batch of a run that died (SPEC §3.9, P3): see `Decider.recover`."""
        self.history.recovery = None
        self.open_calls = recovery.calls
        self.results.update(recovery.results)
        batch = Batch()
        for event in self.decider.recover(recovery, batch, self.history.carry_over):
            yield event
        async for event in self.execute(batch, recovery.calls):
            yield event

    async def execute(self, batch: Batch, calls: list[ToolCall]) -> AsyncIterator[ev.Event]:
        """Run what the decisions allowed; stop on a denial or pause on pending items."""
        if batch.denied and self.agent.on_deny == "stop":
            for event in self.decider.skip(batch):
                yield event
            self.close_batch()
            denied = ", ".join(batch.denied)
            text = f"Stopped: denied {denied}. Send another message to continue."
            self.stop(ev.LoopDenied(denied_tools=batch.denied), text, "denied")
            return
        runner, scheduled = self.runner, batch.scheduled
        if runner.can_inline(scheduled):  # the common case, without a task per call
            yield runner.started(scheduled[0])
            for event in await runner.inline(scheduled[0]):
                self.note(event)
                yield event
        else:
            async for event in runner.run(scheduled):
                self.note(event)
                yield event
        suspended = {
            s.call.id: Suspended(s.call, s.tool, s.args, waits.session_id, waits.pending_ids)
            for s in scheduled
            if (waits := self.outcomes[s.call.id].suspended) is not None
        }
        if batch.deferred or suspended:
            checkpoint = Checkpoint(calls, dict(self.results), batch.deferred, False, suspended)
            self.history.checkpoint = checkpoint
            self.results.clear()
            self.open_calls = []
            what = [
                f"approval of {p.request.call.name}"
                if isinstance(p.request, ApprovalRequest)
                else "an answer to a question"
                for p in batch.deferred.values()
            ]
            what += [f"the subagent {s.call.name}" for s in suspended.values()]
            waiting = [*batch.deferred, *(i for s in suspended.values() for i in s.pending_ids)]
            text = f"Paused: waiting for {', '.join(what)}."
            self.stop(ev.LoopPaused(pending_ids=waiting), text, "paused")
            return
        ran = [self.outcomes[item.call.id] for item in batch.scheduled]
        self.close_batch()
        if ran and len(ran) == len(calls) and all(o.terminate for o in ran):
            self.stop(
                ev.LoopTerminated(reason="a tool asked to end the run"),
                ran[-1].content,
                "terminated",
            )

    def result(
        self,
        call: ToolCall,
        content: str,
        status: str,
        *,
        args: dict[str, Any] | None = None,
        detail: str | None = None,
    ) -> list[ev.Event]:
        """Record a result for a call that did not run, and the events that announce it."""
        is_error = status != "Approved."
        self.results[call.id] = ToolResultMessage(
            call_id=call.id, tool=call.name, content=content, is_error=is_error
        )
        return [
            ev.ToolOutput(id=call.id, tool=call.name, content=content, is_error=is_error),
            ev.ToolResult(
                id=call.id, tool=call.name, status_text=status, args=args, detail_text=detail
            ),
        ]

    def note(self, event: ev.Event) -> None:
        """Keep what a call that ran produced, for the history."""
        if type(event) is ev.ToolOutput:
            self.results[event.id] = ToolResultMessage(
                call_id=event.id, tool=event.tool, content=event.content, is_error=event.is_error
            )

    def close_batch(self) -> None:
        """Append the batch's results to the history in call order."""
        for call in self.open_calls:
            self.history.append(self.results.pop(call.id))
        self.open_calls = []
        self.outcomes.clear()

    def interrupt(self) -> list[ev.Event]:
        """Cancel or failure: keep the history valid for every provider (SPEC §3.9)."""
        events: list[ev.Event] = self.decider.abandon()
        if self.partial:
            self.history.carry_over = "".join(self.partial)
            self.partial.clear()
        for call in self.open_calls:
            if call.id not in self.results:
                events.append(ev.ToolInterrupted(id=call.id, tool=call.name))
                events += self.result(call, INTERRUPTED, "Error.")
        self.close_batch()
        return events

    # ---- collaborators' adapters ------------------------------------------------------------

    def tool_context(self, item: Scheduled, emit: Any) -> ToolContext:
        return ToolContext(
            session_id=self.info.session_id,
            tenant=self.info.tenant,
            agent=self.info.agent,
            call_id=item.call.id,
            tool=item.call.name,
            approver=self.approver,
            open_session=self.children,
            _emit=emit,
        )

    async def after_tool(self, item: Scheduled, outcome: Outcome) -> Outcome:
        hook = self.agent.hooks.after_tool
        if hook is None:
            return outcome
        return await call_hook(hook, self.info, item.call, outcome) or outcome
