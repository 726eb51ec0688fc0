"""The calls of a reply, as one run takes them: each decided in model order (the hook, the gate,
a human for `ask`), run by the `ToolRunner`, and the batch paused on the items left for humans,
resumed with their answers, recovered after a run that died, or closed when the run is cut
short. `Calls` is the part of `steps.Steps` that does it; its fields are the steps' own.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

from .. import events as ev
from ..agent import Agent
from ..approvals import ApprovalRequest
from ..gate.arguments import prepared
from ..gate.batch import Batch, Checkpoint, Pending, record
from ..gate.decide import INTERRUPTED, Decider
from ..hooks import RunInfo
from ..messages import AssistantMessage, Recovery, ToolCall
from ..state.replay import apply, undecided
from ..state.session_state import SessionState
from ..tools import NeedsAnswer, Outcome
from .calls import NOT_RUN, STOPPED, cancel_due, result_events
from .hook_calls import call_hook
from .hook_points import context_after
from .runner import ToolRunner


class Calls:
    """A run's steps about the calls of a reply (the base of `steps.Steps`, which holds the
    fields named here)."""

    agent: Agent
    state: SessionState
    info: RunInfo
    decider: Decider
    runner: ToolRunner
    problems: dict[str, str]
    outcomes: dict[str, Outcome]
    partial: list[str]
    ending: str | None
    terminal: ev.Terminal | None
    text: str
    stop_reason: ev.RunStopReason

    def stop(self, terminal: ev.Terminal, text: str, reason: ev.RunStopReason) -> None:
        self.terminal, self.text, self.stop_reason = terminal, text, reason

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
        tool = self.decider.tools.get(call.name)  # it sees the prepared arguments (`prepared`)
        args = prepared(tool, call) if tool is not None else call.args
        if not hook or isinstance(args, str):  # (a failed preparation: `check` says why)
            return self.decider.check(call, None, batch)
        verdict = await call_hook(hook, self.info, replace(call, args=copy.deepcopy(args)))
        return self.decider.check(call, verdict, batch)

    def checked(
        self, reply: AssistantMessage, call: ToolCall, batch: Batch
    ) -> tuple[list[ev.Event], Pending | None] | None:
        """`decide` without awaiting, for a call of a well-formed reply when no `before_tool`
        hook is set (most calls); None when `decide` is needed."""
        if self.agent.hooks.before_tool or reply.stop_reason == "max_tokens" or self.problems:
            return None
        return self.decider.check(call, None, batch)

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
                decided = self.checked(reply, call, batch)
                events, pending = decided or await self.decide(reply, call, batch)
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
            for event in await runner.lone(scheduled):
                yield event
        else:
            async for event in runner.run(scheduled):
                yield event
        for event in self.ran(batch, calls):
            yield event
        if (hook := self.agent.hooks.after_batch) is not None and self.terminal is None:
            for event in await context_after(hook, self.info, self.state, len(calls)):
                yield event

    def lone(
        self, calls: list[ToolCall], reply: AssistantMessage, batch: Batch
    ) -> list[ev.Event] | None:
        """A reply's one call when nothing can hold it (no hook, no rules, no human: a sync
        tool) and no cancel is due, decided at once: its text, its decision and its start (the
        runner's `lone` runs it, then `ran`). None, deciding nothing: `execute` takes it."""
        hooks = self.agent.hooks  # (the batch's context hook runs at `execute`'s end)
        if len(calls) != 1 or hooks.before_tool or hooks.after_batch or self.problems:
            return None
        if reply.stop_reason == "max_tokens" or cancel_due():
            return None
        if (decided := self.decider.at_once(calls[0], batch)) is None:
            return None
        text = [ev.AssistantText(text=reply.text)] if reply.text else []
        return [*text, *decided, *map(self.runner.started, batch.scheduled)]

    def ran(self, batch: Batch, calls: list[ToolCall]) -> Iterator[ev.Event]:
        """The allowed calls ran: the batch closes (the run stops after this step when every
        call said `terminate`), or the run pauses on the calls that wait (suspended, or deferred
        to a human), the questions they ask first. (Taken as they are yielded: a cancel that
        lands at one of them finds the run not paused yet.)"""
        scheduled, outcomes = batch.scheduled, self.outcomes
        waits: list[tuple[str, list[str]]] = []  # (what, pending ids) of the suspended calls
        terminate = len(scheduled) == len(calls)  # every call of the reply ran and says so
        for item in scheduled:
            outcome = outcomes[item.call.id]
            terminate = terminate and outcome.terminate
            suspended = outcome.suspended
            if isinstance(suspended, NeedsAnswer):  # its question, then the call waits on it
                asked = self.decider.needs_answer(item.call, suspended)
                yield from asked
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
            self.ending = outcomes[scheduled[-1].call.id].content
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
        carry-over, as the journal's `message:partial` records it (the step is finished by
        `Steps.ended_by`)."""
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
        return events
