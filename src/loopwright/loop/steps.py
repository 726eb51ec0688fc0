"""The steps of one run, and the state they share between them.

`run_loop` (in `loop.py`) tells the story; `Steps` holds what a run carries between steps (the
step count, the text streamed so far, the calls' outcomes, how it ended) and does each thing the
loop names, delegating policy: the `Decider` (gate, humans), the `ToolRunner`, `retry`, hooks.

The session's state (`replay.SessionState`) changes as the run's events are applied to it by
the reducer as each is yielded (`driver.Run`), the function that rebuilds it from the log: a
change is an event, yielded before anything relies on it. Not events: the checkpoint of a batch
the run pauses on (`replay.checkpoint`), and a cut reply's text (the journal's `message:partial`).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from .. import events as ev
from ..agent import Agent
from ..approvals import ApprovalRequest, Approver
from ..errors import describe
from ..gate.decide import INTERRUPTED, Batch, Checkpoint, Decider, Pending, record
from ..gate.permissions import Gate
from ..hooks import Block, RunInfo, Stop
from ..messages import AssistantMessage, Recovery, ToolCall, Usage, UserMessage
from ..models import Model, ModelFailure, ModelRequest, StreamItem, ToolSpec
from ..models.registry import get_model
from ..state._values import maker
from ..state.compaction import CompactionReason, compact
from ..state.replay import SessionState, apply, undecided
from ..tools import NeedsAnswer, Outcome
from .budget import context_budget
from .fallback import Fallback
from .finish import Finish
from .hook_calls import call_hook, observe
from .output import answering
from .replies import check_reply
from .retry import Deadline, ModelFailed, next_retry, partial_note
from .runner import NOT_RUN, STOPPED, ToolRunner, cancel_due, result_events
from .runner import after_tool as after
from .runner import tool_context as context
from .threads import Signal

# (the values made every step, by their makers: see `_values.maker`)
step_started, step_finished = maker(ev.StepStarted), maker(ev.StepFinished)
model_request, input_received = maker(ModelRequest), maker(ev.InputReceived)
user_message, loop_done, new_scope = maker(UserMessage), maker(ev.LoopDone), maker(ev.Scope)
done_event = maker(ev.Done)


@dataclass(slots=True)
class Steps:
    """One run's state between steps, and the steps `run_loop` takes by name."""

    agent: Agent
    model: Model
    gate: Gate
    state: SessionState
    info: RunInfo
    signals: set[Signal]  # the stop signals of its calls in flight (the session's)
    approver: Approver | None
    children: Any = None
    tools: dict[str, Any] = field(init=False)
    specs: tuple[ToolSpec, ...] = ()
    decider: Decider = field(init=False)
    runner: ToolRunner = field(init=False)
    step: int = 0
    in_step: bool = False
    usage: Usage | None = None
    """The usage of this step's reply, once it is complete."""
    ending: str | None = None
    """The batch's every call said `terminate`: the run stops with this text, unless steering or
    a follow-up is queued (it would stop: they go on, as after a reply without tools)."""
    budget: int = 100_000
    may_shrink: bool = True
    retries: int = 0
    fallback: Fallback | None = None  # the fallback models left (made at the first failure)
    finish: Finish = field(default_factory=Finish)  # a cut reply continued, the output checked
    partial: list[str] = field(default_factory=list)
    reply: AssistantMessage | None = None  # (this step's, once complete)
    failure: ModelFailure | None = None
    failures: int = 0
    deadline: Deadline = field(init=False)
    problems: dict[str, str] = field(default_factory=dict)
    """Call id → why that call of the reply will not run (`replies.check_reply`)."""
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    terminal: ev.Terminal | None = None
    text: str = ""
    stop_reason: ev.RunStopReason = "completed"

    def __post_init__(self) -> None:
        self.tools = self.agent._by_name  # the agent's table: its live toolsets update it
        agent, info = self.agent, self.info
        self.budget = context_budget(agent, self.model)
        self.deadline = Deadline(agent.retry.deadline)  # each model request's
        scope = new_scope(tenant=info.tenant, environment=info.environment, agent=info.agent)
        # Collaborators get what they need, never the steps: no reference cycle, freed at once.
        self.decider = Decider(self.tools, self.gate, scope, info.session_id, self.approver)
        hook = agent.hooks.after_tool
        self.runner = ToolRunner(
            partial(context, info, self.approver, self.children),
            self.outcomes,
            agent.tool_concurrency,
            agent.tool_timeout,
            agent.max_tool_output,
            partial(after, hook, info) if hook else None,
            self.signals,
            agent.tool_grace,
        )

    async def compact(self, reason: CompactionReason) -> AsyncIterator[ev.Event]:
        settings = self.info.settings.over(self.agent.settings)  # the run's, for the summary
        policy, where = self.agent.compaction, (self.info.session_id, self.agent.retry.deadline)
        async for event in compact(
            self.state.history, self.model, policy, reason, settings, *where
        ):
            yield event

    async def after_failure(self) -> AsyncIterator[ev.Event]:
        """A request failed (past its deadline: retryable): compact a prompt too long (once), or
        wait and retry within bounds (SPEC §3.8), or switch to a fallback, or give up."""
        failure, failures, limit = self.failure, self.failures, self.agent.retry.deadline
        if self.deadline.lapsed:
            failure = ModelFailure(error=f"no complete reply within {limit:g}s", retryable=True)
        if failure is None:
            return
        self.failures += 1
        if failure.prompt_too_long and self.may_shrink:
            async for event in self.shrink():
                yield event
            return
        if self.fallback is None:
            self.fallback = Fallback.of(self.agent)
        fallback = self.fallback
        own = fallback.count(failures)  # the current model's failures of this request
        retry = next_retry(self.agent.retry, failure, own, self.retries)
        switch = fallback.switch(self.model, failure, failures) if retry is None else None
        if switch is not None:
            self.model, self.retries, self.may_shrink = switch[0], 0, True  # all afresh
            self.budget = context_budget(self.agent, self.model)
            yield switch[1]
            return
        if retry is None:
            policy = self.agent.retry
            spent = failure.retryable and own < policy.attempts and self.retries >= policy.budget
            raise ModelFailed(
                f"{failure.error} (the run's retry budget is spent)" if spent else failure.error
            )
        self.retries += 1
        yield retry
        await asyncio.sleep(retry.delay)

    async def shrink(self) -> AsyncIterator[ev.Event]:
        """The provider said the prompt is too long: compact once, then the request is retried."""
        self.may_shrink = False
        before = len(self.state.history.messages)
        async for event in self.compact("prompt_too_long"):
            yield event
        yield ev.PromptCompaction(from_=before, to=len(self.state.history.messages))

    def stop(self, terminal: ev.Terminal, text: str, reason: ev.RunStopReason) -> None:
        self.terminal, self.text, self.stop_reason = terminal, text, reason

    def ended_by(self, exc: BaseException) -> list[ev.Event]:
        """A cancel aborts the run, an error ends it (`loop:error`), what it left open closed."""
        events = self.interrupt(cancelled=isinstance(exc, asyncio.CancelledError))
        if isinstance(exc, asyncio.CancelledError):
            self.abort()
        else:
            self.stop(ev.LoopError(error=describe(exc)), f"Error: {describe(exc)}", "error")
        return events

    def abort(self) -> None:
        """The run was cancelled: what was queued for it is dropped (`loop:aborted` drops it).
        A run that already paused has nothing left to stop: the pause stands, and its asks
        stay resolvable."""
        if self.stop_reason == "paused":
            return
        aborted = ev.LoopAborted(reason="cancelled", carry_over=self.state.carry_over)
        self.stop(aborted, "Cancelled.", "aborted")

    async def wind_down(self) -> list[ev.Event]:
        """After the loop (which took `max_turns` steps if it did not end): the late results of
        threads still running (waiting up to the grace for them), the run-end hook, the terminal
        event and `done`. A cancel that comes now aborts the run; a raising hook does not change
        how it ended (`hook:failed`)."""
        runner = self.runner
        if self.terminal is None:
            turns = self.agent.max_turns
            text = f"Stopped after {turns} turns without a final answer."
            self.stop(ev.LoopMaxTurns(max_turns=turns), text, "max_turns")
        if runner.strays:
            try:
                await runner.settle()
            except asyncio.CancelledError:
                self.abort()
        events, hooks = runner.close(), self.agent.hooks
        if hooks.on_run_end is not None:  # (no coroutine to observe nothing)
            try:
                events += await observe(hooks, "on_run_end", self.info, self.stop_reason)
            except asyncio.CancelledError:
                self.abort()
        assert self.terminal is not None
        events += (self.terminal, done_event(text=self.text, stop_reason=self.stop_reason))
        return events

    async def start(self, text: str | UserMessage | None) -> list[ev.Event]:
        """The carry-over note, the input (unless the prompt hook blocks it), steering."""
        hooks, carry_over = self.agent.hooks, self.state.carry_over
        events: list[ev.Event] = []
        if carry_over:
            note = UserMessage(
                content="[Your previous reply was interrupted. What you had "
                f"written so far:]\n{carry_over}"
            )
            events.append(ev.InputReceived(message=note))
        if text is not None:
            given = text if isinstance(text, UserMessage) else user_message(content=text)
            text = given.content
            extra = await call_hook(hooks.on_prompt, self.info, text) if hooks.on_prompt else None
            if isinstance(extra, Block):
                reason = f"input blocked: {extra.reason}"
                self.stop(ev.LoopTerminated(reason=reason), extra.reason, "terminated")
                return events
            message = replace(given, content=f"{text}\n\n{extra}") if extra else given
            events.append(input_received(message=message))
        return events + self.inject("steer", self.agent.steering)

    def inject(self, kind: Any, how: str) -> list[ev.Event]:
        """The queued messages of `kind` delivered now (the first, or `all`): they leave the
        state's queue as their `steering:injected` is applied."""
        if not self.state.queued:
            return []
        queue = [text for mode, text in self.state.queued if mode == kind]
        taken = queue if how == "all" else queue[:1]
        return [ev.SteeringInjected(message=UserMessage(content=t), mode=kind) for t in taken]

    def started(self) -> ev.StepStarted:
        self.step, self.in_step, self.usage = self.step + 1, True, None
        self.reply, self.failures = None, 0
        return step_started(step=self.step)

    def finished(self) -> ev.StepFinished:
        """Every step that started finishes, also one an error or a cancel cut short."""
        self.in_step = False
        return step_finished(step=self.step, usage=self.usage)

    async def request(self, check: ev.BudgetCheck) -> AsyncIterator[StreamItem]:
        """This step's request made (text a failed attempt had streamed rides along as a note)
        and sent, its deadline started (`retry.Deadline`): the stream of its reply."""
        agent, self.failure = self.agent, None
        notes = (check.nudge.content,) if check.nudge else ()
        if self.partial:
            notes = (*notes, partial_note(self.partial))
        if agent._live:
            await agent.refresh_tools()
        request = model_request(
            system=agent.instructions,
            messages=self.state.history.messages,
            tools=agent.tool_specs,
            notes=notes,
            max_output_tokens=agent.max_output_tokens,
            settings=self.info.settings.over(agent.settings),
            output=agent.output.format if agent.output is not None else None,
            session_id=self.info.session_id,
        )
        if agent.hooks.before_request:
            request = await call_hook(agent.hooks.before_request, self.info, request) or request
        model = get_model(request.model) if request.model is not None else self.model
        await self.deadline.start()
        return answering(model, agent.output, agent.output_mode).stream(request)

    def streamed(self, item: Any) -> Any:
        """One item of the reply's stream, as the loop yields it: the complete reply with its
        malformed calls renamed before anyone sees it; not the failure (the stream's last)."""
        if type(item) is ev.TextDelta:
            self.partial.append(item.delta)
        elif isinstance(item, ModelFailure):
            self.failure = item
            return None
        elif isinstance(item, ev.MessageCompleted):
            self.partial.clear()  # (no longer partial)
            message, self.problems = check_reply(item.message)
            item = item if message is item.message else ev.MessageCompleted(message=message)
            self.reply = item.message
        return item

    def accept(self) -> tuple[AssistantMessage, list[ToolCall]]:
        """The reply is complete (its `message:completed` put it in the history and opened the
        batch of its calls, if any): it and its calls."""
        reply, batch = self.reply, self.state.batch
        assert reply is not None
        self.usage, calls = reply.usage, batch.calls if batch is not None else []
        for call in calls:  # an earlier call's late result would now name this one: logged only
            self.runner.latest.pop(call.id, None)
        return reply, calls

    async def proceed(self, reply: AssistantMessage, calls: list[ToolCall]) -> list[ev.Event]:
        """After the step (SPEC §3, 8): the continuation policy may stop after a batch (the
        queues are left to the session's next run); else steering is delivered. When the run would
        stop (a reply without tools, or a batch whose every call said `terminate`) and no steering
        was, follow-ups or the stop hook's message go on instead. A reply without tools is first
        the answer `finish` checks: a cut one may go on, a wrong one is asked again."""
        hooks, ending = self.agent.hooks, self.ending
        if self.terminal is not None:
            return []
        if calls and ending is None and hooks.continuation:
            verdict = await call_hook(hooks.continuation, self.info, reply)
            if isinstance(verdict, Stop):
                self.stop(ev.LoopTerminated(reason=verdict.reason), verdict.reason, "terminated")
                return []
        events = self.runner.arrived() if self.runner.late else []
        queued = self.inject("steer", self.agent.steering)
        if not queued and not calls:  # a cut reply goes on, a wrong answer is asked again
            events, queued = self.finish.check(self.agent, reply, events)
        if not queued and (not calls or ending is not None):
            queued = self.inject("follow_up", self.agent.follow_up)
            if not queued and not calls and hooks.on_stop:
                more = await call_hook(hooks.on_stop, self.info, reply.text)
                if more:  # delivered as a follow-up, at once
                    message = UserMessage(content=more)
                    queued = [ev.SteeringInjected(message=message, mode="follow_up")]
            if not queued and ending is None:
                answer = self.finish.answer
                self.stop(loop_done(text=answer), answer, "completed")
        if queued:
            self.ending = None
        self.terminated()
        return events + queued

    def terminated(self) -> None:
        """A batch whose every call said `terminate` ends the run (a resumed one at once)."""
        if self.ending is not None:
            reason = "a tool asked to end the run"
            self.stop(ev.LoopTerminated(reason=reason), self.ending, "terminated")
            self.ending = None

    async def decide(
        self, reply: AssistantMessage | None, call: ToolCall, batch: Batch
    ) -> tuple[list[ev.Event], Pending | None]:
        """One call, in model order, through the hook and the gate: its events, and the item a
        human is to answer for an `ask` (`decider.ask`). A reply cut off by the output limit
        never runs its calls, nor does a malformed call: each gets an error."""
        if reply is not None and reply.stop_reason == "max_tokens":
            cut = "Not run: the reply was cut off by the output limit, so it may be incomplete."
            return record(call, cut, "Error."), None
        if call.id in self.problems:  # a malformed call: an error result, never run
            return record(call, self.problems[call.id], "Error."), None
        hook = self.agent.hooks.before_tool  # (gets a copy: it changes arguments by returning)
        shown = replace(call, args=copy.deepcopy(call.args)) if hook else call
        verdict = await call_hook(hook, self.info, shown) if hook else None
        return self.decider.check(call, verdict, batch)

    async def resume(self, checkpoint: Checkpoint) -> AsyncIterator[ev.Event]:
        """Finish a paused batch with the humans' answers, then let the run go on."""
        batch, closed = Batch(), Batch()
        for pending in checkpoint.pending.values():
            if pending.decision is None:  # closed by a sibling's denial
                if pending.request.call.id not in checkpoint.suspended:  # (skipped by `rerun`)
                    closed.deferred[pending.request.id] = pending
                continue
            assert pending.resolved_at is not None
            for event in self.decider.decide_human(
                pending, pending.decision, pending.resolved_at, batch
            ):
                yield event
        for event in self.decider.rerun(checkpoint, closed if checkpoint.closed else batch):
            yield event
        for call in undecided(checkpoint):  # (none, mostly: a run that died while it asked)
            events, asked = await self.decide(None, call, batch)
            for event in events:
                yield event
            if asked is not None:
                async for event in self.decider.ask(asked, batch):
                    yield event
        if closed.deferred or closed.scheduled:
            closed.denied = batch.denied
            for event in self.decider.skip(closed):
                yield event
        async for event in self.execute(batch, checkpoint.calls):
            yield event
        self.terminated()

    async def recover(self, recovery: Recovery) -> AsyncIterator[ev.Event]:
        """Close the batch of a run that died (SPEC §3.9, P3): see `Decider.recover`."""
        batch = Batch()
        for event in self.decider.recover(recovery, batch, self.state.carry_over):
            yield event
        async for event in self.execute(batch, recovery.calls):
            yield event
        self.terminated()

    async def execute(
        self, batch: Batch, calls: list[ToolCall], reply: AssistantMessage | None = None
    ) -> AsyncIterator[ev.Event]:
        """Run what the decisions allowed; stop on a denial or pause on pending items. The
        batch closes (its results join the history) with the output of its last call. Given
        the reply, its text and its calls' decisions come first (`decide`, `decider.ask`)."""
        if reply is not None:
            if reply.text:
                yield ev.AssistantText(text=reply.text)
            for call in calls:  # in model order: the hook, the gate, for `ask` a human
                events, pending = await self.decide(reply, call, batch)
                for event in events:
                    yield event
                if pending is not None:
                    async for event in self.decider.ask(pending, batch):
                        yield event
        if batch.denied and self.agent.on_deny == "stop":
            for event in self.decider.skip(batch):
                yield event
            self.runner.reset()
            text = f"Stopped: denied {', '.join(batch.denied)}. Send another message to continue."
            self.stop(ev.LoopDenied(denied_tools=batch.denied), text, "denied")
            return
        if batch.closed:  # asks a human's denial closed
            for event in self.decider.closed(batch):
                yield event
        runner, scheduled = self.runner, batch.scheduled
        if runner.alone(scheduled):  # the common case, without a task per call
            if cancel_due():
                await asyncio.sleep(0)  # it lands before the call starts
            yield runner.started(scheduled[0])
            for event in await runner.one(scheduled[0]):
                yield event
        else:
            async for event in runner.run(scheduled):
                yield event
        waits: list[tuple[str, list[str]]] = []  # (what, pending ids) of the suspended calls
        terminate = len(scheduled) == len(calls)  # every call of the reply ran and says so
        for item in scheduled:
            outcome = self.outcomes[item.call.id]
            terminate = terminate and outcome.terminate
            suspended = outcome.suspended
            if isinstance(suspended, NeedsAnswer):  # its question, then the call waits on it
                asked = self.decider.needs_answer(item.call, suspended)
                for event in asked:
                    yield event
                ids = [e.id for e in asked if isinstance(e, ev.QuestionPending)]
                waits.append(("an answer to a question", ids))
            elif suspended is not None:
                waits.append((f"the subagent {item.call.name}", suspended.pending_ids))
        if batch.deferred or waits:
            self.paused(batch)
            what = [
                f"approval of {p.request.call.name}"
                if isinstance(p.request, ApprovalRequest)
                else "an answer to a question"
                for p in batch.deferred.values()
            ]
            what += [name for name, _ in waits]
            waiting = [*batch.deferred, *(i for _, ids in waits for i in ids)]
            text = f"Paused: waiting for {', '.join(what)}."
            self.stop(ev.LoopPaused(pending_ids=waiting), text, "paused")
            return
        if terminate and scheduled:  # the run stops after this step (`proceed`)
            self.ending = self.outcomes[scheduled[-1].call.id].content
        self.runner.reset()

    def paused(self, batch: Batch) -> None:
        """The run pauses on the batch: the values checked live for its deferred calls are kept
        with it (its checkpoint, derived from the state, gives them to the resumption)."""
        assert self.state.batch is not None
        checked = self.state.batch.checked
        for pending_id, item in batch.deferred.items():
            if item.checked is not None:
                checked[pending_id] = item.checked

    def interrupt(self, *, cancelled: bool = False) -> list[ev.Event]:
        """Cancel or failure: every open call gets a result, and the history stays valid for
        every provider (SPEC §3.9). A call that finished keeps its real result; any other says
        what it was doing: not started, stopped while it ran, or still running in its thread
        (its real outcome follows as `tool:late_result`). The text streamed so far is the
        carry-over, as the journal's `message:partial` records it."""
        events: list[ev.Event] = self.decider.abandon()
        if self.partial:
            apply(self.state, ev.MessagePartial(text="".join(self.partial)))
            self.partial.clear()
        runner, batch = self.runner, self.state.batch
        calls, results = (batch.calls, batch.results) if batch is not None else ([], {})
        for call in calls:
            if call.id in results:
                continue
            outcome, item = runner.outcomes.get(call.id), runner.items.get(call.id)
            if outcome is not None and item is not None and outcome.suspended is None:
                events += result_events(item, outcome)
                continue
            events.append(ev.ToolInterrupted(id=call.id, tool=call.name))
            text = STOPPED if outcome is not None else runner.unfinished.get(call.id)
            events += record(call, text or (NOT_RUN if cancelled else INTERRUPTED), "Error.")
        runner.reset()
        if self.in_step:
            events.append(self.finished())
        return events
