"""The steps of one run, and the state they share between them.

`run_loop` (in `loop.py`) tells the story; `Steps` holds what a run carries between steps (the
step count, the text streamed so far, the calls' outcomes, how it ended) and does each thing the
loop names, delegating policy: the `Decider` (gate, humans), the `ToolRunner`, `retry`, hooks.

The session's state (`session_state.SessionState`) changes as the run's events are applied to
it by the reducer as each is yielded (`driver.Run`), the function that rebuilds it from the log:
a change is an event, yielded before anything relies on it (the checkpoint of a batch the run
pauses on is derived from it). Not an event: a cut reply's text (the journal's `message:partial`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, cast

from .. import events as ev
from ..agent import Agent
from ..approvals import Approver
from ..errors import describe
from ..gate.decide import Decider
from ..gate.permissions import Gate
from ..hooks import Block, RunInfo, Stop
from ..messages import AssistantMessage, ModelMessage, ToolCall, Usage, UserMessage
from ..models import Model, ModelFailure, ModelRequest, StreamItem
from ..models.registry import get_model
from ..state._values import maker
from ..state.compaction import CompactionReason, compact
from ..state.session_state import SessionState
from ..tools import Outcome
from .batch_steps import Calls
from .budget import context_budget
from .conversion import model_view
from .fallback import Fallback
from .finish import Finish
from .handoff import following, handing_off, second_transfers
from .hook_calls import call_hook, observe
from .hook_points import transformed, wrapped
from .keys import CallKeys
from .output import answering
from .replies import check_reply
from .retry import Deadline, ModelFailed, next_retry, partial_note
from .runner import ToolRunner
from .runner import after_tool as after
from .runner import tool_context as context
from .threads import Signal

# (the values made every step, by their makers: see `_values.maker`)
step_started, step_finished = maker(ev.StepStarted), maker(ev.StepFinished)
model_request, input_received = maker(ModelRequest), maker(ev.InputReceived)
user_message, loop_done, new_scope = maker(UserMessage), maker(ev.LoopDone), maker(ev.Scope)
done_event = maker(ev.Done)


@dataclass(slots=True)
class Steps(Calls):
    """One run's state between steps, and the steps `run_loop` takes by name (those about a
    reply's calls: `batch_steps.Calls`)."""

    agent: Agent
    model: Model
    gate: Gate
    state: SessionState
    info: RunInfo
    signals: set[Signal]  # the stop signals of its calls in flight (the session's)
    approver: Approver | None
    session: Any = None  # (the calls' `ToolContext`: subagents, stored results)
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
        self.agent, self.model, self.gate, self.info = following(self)  # (after a handoff)
        self.deadline = Deadline(self.agent.retry.deadline)  # each model request's
        self.equip()

    def equip(self) -> None:
        """The collaborators made for the run's agent (as it starts, and after a handoff)."""
        agent, info, self.fallback = self.agent, self.info, None
        self.budget = context_budget(agent, self.model)
        scope = new_scope(tenant=info.tenant, environment=info.environment, agent=info.agent)
        # Collaborators get what they need, never the steps: no reference cycle, freed at once.
        tools = agent._by_name  # (the agent's table: its live toolsets update it)
        self.decider = Decider(tools, self.gate, scope, info.session_id, self.approver)
        hook = agent.hooks.after_tool
        self.runner = ToolRunner(
            partial(context, info, self.approver, self.session),
            self.outcomes,
            agent.tool_concurrency,
            agent.tool_timeout,
            agent.max_tool_output,
            partial(after, hook, info) if hook else None,
            self.signals,
            agent.tool_grace,
            keys=CallKeys(info, self.state),
            around=wrapped(agent.hooks.around_tool, info, self.outcomes),
        )

    async def hand_off(self) -> list[ev.Event]:
        """`agent:handoff` when a transfer is due (`loop.handoff`): the target's from now on."""
        if (handed := await handing_off(self)) is None:
            return []
        event, self.agent, self.model, self.gate, self.info = handed
        self.equip()
        return [event]

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

    def ended_by(self, exc: BaseException) -> list[ev.Event]:
        """A cancel aborts the run, an error ends it (`loop:error`), what it left open closed."""
        events = self.interrupt(cancelled=isinstance(exc, asyncio.CancelledError))
        if self.in_step:
            events.append(self.finished())
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
        return events + self.inject("steer", self.agent.steering) if self.state.queued else events

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
        if agent._live:  # (entered by the session's owner: a reloaded handoff's target too)
            await agent.refresh_tools(getattr(self.session, "toolsets", None))
        history = self.state.history
        messages = cast("list[ModelMessage]", history.messages)
        if history.customs or agent.hooks.convert:  # (the model's view: `conversion`)
            messages = await model_view(agent.hooks.convert, self.info, history.messages)
        request = model_request(
            system=agent.instructions,
            messages=messages,
            tools=agent._specs,  # (`tool_specs`, without its frame)
            notes=notes,
            max_output_tokens=agent.max_output_tokens,
            settings=self.info.settings.over(agent.settings),
            output=output.format if (output := agent._output) is not None else None,
            session_id=self.info.session_id,
        )
        if agent.hooks.before_request:
            request = await call_hook(agent.hooks.before_request, self.info, request) or request
        model = get_model(request.model) if request.model is not None else self.model
        if self.deadline.timeout is None:
            await self.deadline.enter()
        self.deadline.start()
        return answering(model, output, agent.output_mode).stream(request)

    def streamed(self, item: Any) -> Any:
        """One item of the reply's stream, as the loop yields it: the complete reply with its
        malformed calls renamed before anyone sees it; not the failure (the stream's last)."""
        if type(item) is ev.TextDelta:
            self.partial.append(item.delta)
        elif isinstance(item, ModelFailure):
            self.failure = item
            return None
        elif isinstance(item, ev.MessageCompleted):
            message, self.problems = check_reply(item.message)
            item = item if message is item.message else ev.MessageCompleted(message=message)
            self.reply = item.message
            if self.agent.hooks.transform_reply is not None:
                return None  # (held: `transform` yields it)
            self.partial.clear()  # (no longer partial)
        return item

    async def transform(self) -> list[ev.Event]:
        """The reply `streamed` held, as the `transform_reply` hook leaves it (`hook_points`)."""
        hook, reply = self.agent.hooks.transform_reply, self.reply
        assert reply is not None
        events, self.reply, self.problems = await transformed(hook, self.info, reply, self.problems)
        self.partial.clear()  # (no longer partial)
        return events

    def accept(self) -> tuple[AssistantMessage, list[ToolCall]]:
        """The reply is complete (its `message:completed` put it in the history and opened the
        batch of its calls, if any): it and its calls."""
        reply, batch = self.reply, self.state.batch
        assert reply is not None
        self.usage, calls = reply.usage, batch.calls if batch is not None else []
        self.problems |= second_transfers(self.agent, calls) if self.agent._handoffs else {}
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
        queued = self.inject("steer", self.agent.steering) if self.state.queued else []
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
                self.stop(loop_done(text=answer), answer, self.finish.stop_reason)
        if queued:
            self.ending = None
        elif self.ending is not None:  # (most steps: no frame to find that out)
            self.terminated()
        queued += await self.hand_off() if self.agent._handoffs and self.terminal is None else []
        return events + queued
