"""Deciding a batch: each call of a reply, in the order the model emitted them, goes through
the tool lookup, the `before_tool` hook's verdict, argument validation, the gate and — for `ask`
— a human (SPEC §3 step 5). Unknown tools, blocked calls and invalid arguments get their error
result here, without a decision; denials get theirs after their decision.

The gate decides on the validated arguments (`arguments.plain` of what the tool will receive),
and the tool runs on exactly those values. A human's edit is validated, then put through the
gate: a `deny` refuses it (the item stays open); otherwise the human's approval stands."""

from __future__ import annotations

import copy
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from .. import events as ev
from ..approvals import (
    DEFER,
    Answer,
    Approval,
    ApprovalRequest,
    Approver,
    QuestionRequest,
    ask_human,
    now_iso,
)
from ..hooks import Block
from ..messages import Recovery, ToolCall
from ..redact import MARKER, holds_marker
from ..state._values import maker
from ..tools import NeedsAnswer, Scheduled, Tool, answered, is_question
from .arguments import gate_decision, not_json, prepared, vet_edit, vet_values
from .batch import Batch, Checkpoint, Pending, record

# (also names of this module for now: steps, session, the reducer, history, the journal import them)
from .permissions import ALLOWED, AllowAll, Decision, Gate

INTERRUPTED = "[interrupted: tool call did not complete]"  # (known not to have started)
MAY_HAVE_RUN = (  # (its intent was logged, its result was not: what it did is not known)
    "[interrupted: the call started, but its run stopped before its result: it may have run, "
    "in part or in full, and its outcome is unknown. Check before repeating it.]"
)
UNGATED = Decision("allow", "built-in: not gated")
RESUMED_CHILD = "resumed: the subagent's pending items were resolved"
# (what every allowed call makes, by the values' makers: see `_values.maker`)
scheduled, decision_event = maker(Scheduled), maker(ev.ActauthDecision)


@dataclass(slots=True)
class Decider:
    tools: dict[str, Tool]
    gate: Gate
    scope: ev.Scope
    session_id: str
    approver: Approver | None
    asking: Pending | None = None
    """The call whose approval is being awaited right now, if any."""

    def check(
        self, call: ToolCall, verdict: object, batch: Batch
    ) -> tuple[list[ev.Event], Pending | None]:
        """Everything short of a human: the events so far, and the pending ask if any."""
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            text = f"Unknown tool '{call.name}'. Available tools: {known}."
            return record(call, text, "Error."), None
        if isinstance(verdict, Block):
            return record(call, f"Blocked: {verdict.reason}", "Error."), None
        args = verdict if isinstance(verdict, dict) else prepared(tool, call)
        if isinstance(args, str):  # its `prepare_arguments` failed: the model reads why
            return record(call, args, "Error."), None
        odd = not_json(args) if args is not call.args else None  # a hook's or prepared: NaN
        try:
            if odd is not None:
                raise ValueError(odd)
            kwargs = tool.validate(args)
        except ValueError as exc:
            text = f"Invalid arguments for tool '{call.name}': {exc}"
            return record(call, text, "Error.", args=call.args if odd else args), None
        if is_question(tool):  # a question for the person, never gated
            return self.question(call, tool, kwargs)
        if not tool.gated:
            decision = UNGATED
        elif type(self.gate) is AllowAll:  # (no rules: what it decides, without two frames)
            decision = ALLOWED
        else:
            decision = gate_decision(self.gate, tool, kwargs, self.scope)
        reason = decision.reason
        if decision.kind == "allow":
            batch.scheduled.append(
                scheduled(call=call, tool=tool, args=args, kwargs=kwargs, reason=reason)
            )
            return [decision_event(tool=call.name, decision="allow", reason=reason)], None
        if decision.kind == "deny":
            first = ev.ActauthDecision(tool=call.name, decision="deny", reason=reason)
            return [first, *self.deny(call, reason, batch, args)], None
        shown = copy.deepcopy(args)  # what a human is shown shares nothing with what runs
        request = ApprovalRequest(
            id="apr_" + secrets.token_urlsafe(18),
            call=replace(call, args=shown if args is call.args else copy.deepcopy(call.args)),
            args=shown,
            parameters=tool.parameters,
            scope=self.scope,
            reason=reason,
            requested_at=now_iso(),
        )
        announce = ev.ApprovalPending(
            id=request.id,
            tool=call.name,
            args=shown,
            scope=self.scope,
            reason=reason,
            requested_at=request.requested_at,
            label=tool.label,
        )
        requested = ev.PendingRequested(id=request.id, call_id=call.id)
        return [announce, requested], Pending(request=request, tool=tool, checked=(args, kwargs))

    def at_once(self, call: ToolCall, batch: Batch) -> list[ev.Event] | None:
        """`check` of a call of a sync tool that nothing can hold (the gate allows every call:
        no rules; not a question), with no hook's verdict; None, deciding nothing, for any other
        call. Its arguments may still be invalid (its error result, nothing scheduled)."""
        tool = self.tools.get(call.name)
        if tool is None or tool.is_async or is_question(tool):
            return None
        if tool.gated and type(self.gate) is not AllowAll:
            return None
        return self.check(call, None, batch)[0]

    def question(
        self, call: ToolCall, tool: Tool, kwargs: dict[str, Any]
    ) -> tuple[list[ev.Event], Pending]:
        request = QuestionRequest(
            id="q_" + secrets.token_urlsafe(18),
            call=call,
            question=kwargs["question"],
            options=kwargs.get("options"),
            agent=self.scope.agent,
            session_id=self.session_id,
            requested_at=now_iso(),
        )
        announce = ev.QuestionPending(
            id=request.id,
            question=request.question,
            agent=request.agent,
            requested_at=request.requested_at,
            options=request.options,
            session_id=request.session_id,
        )
        requested = ev.PendingRequested(id=request.id, call_id=call.id, kind="question")
        return [announce, requested], Pending(request=request, tool=tool)

    async def ask(self, pending: Pending, batch: Batch) -> AsyncIterator[ev.Event]:
        """Wait for the live approver (or defer), then decide the call."""
        request, tool, call = pending.request, pending.tool, pending.request.call
        self.asking = pending
        from_log = getattr(self.approver, "from_log", False)  # (the runtime's: it records)

        def vet(args: dict[str, Any], logged: bool) -> None:  # (`logged`: vetted as recorded)
            assert isinstance(request, ApprovalRequest)
            gate, scope, vetted = self.gate, request.scope, logged and from_log
            if vetted and holds_marker(args):  # (read back from the log: `approved_values`
                return  # refuses what lost a secret to redaction)
            pending.checked = (
                args,
                tool.validate(args) if vetted else vet_edit(tool, gate, scope, args),
            )

        answer = await ask_human(self.approver, request, vet)
        self.asking = None
        if answer is DEFER:
            if isinstance(request, ApprovalRequest):
                yield ev.ActauthDecision(tool=call.name, decision="ask", reason=request.reason)
            batch.deferred[request.id] = pending
            return
        assert isinstance(answer, (Approval, Answer))
        for event in self.decide_human(pending, answer, now_iso(), batch, live=True):
            yield event
        if isinstance(answer, Approval) and not answer.approved:  # the batch's asks are closed
            batch.closed.update(batch.deferred)
            batch.deferred.clear()

    def decide_human(
        self,
        pending: Pending,
        answer: Approval | Answer,
        resolved_at: str,
        batch: Batch,
        live: bool = False,
    ) -> list[ev.Event]:
        """A human's answer to a pending call (`live`, or when a paused batch resumes)."""
        request, tool, call = pending.request, pending.tool, pending.request.call
        if isinstance(request, QuestionRequest):
            assert isinstance(answer, Answer)
            resolved = ev.QuestionResolved(
                id=request.id, answer=answer.text, by=answer.by, resolved_at=resolved_at
            )
            if not is_question(tool):  # a running call's own question: the call runs again
                return [resolved]
            why = "ask_user: the person answered"
            kwargs, tool = {"answer": answer.text}, answered(tool)
            batch.scheduled.append(
                Scheduled(call=call, tool=tool, args=call.args, kwargs=kwargs, reason=why)
            )
            return [resolved, ev.ActauthDecision(tool=call.name, decision="allow", reason=why)]
        assert isinstance(answer, Approval)
        own = request.args if pending.checked is None else pending.checked[0]  # (not a copy)
        args = answer.args if answer.args is not None else own
        events: list[ev.Event] = [
            ev.ApprovalResolved(
                id=request.id,
                tool=call.name,
                decision="approve" if answer.approved else "deny",
                by=answer.by,
                resolved_at=resolved_at,
                args=answer.args,
                reason=answer.reason,
            )
        ]
        if not answer.approved:
            why = f"{request.reason} — human denied" + (
                f": {answer.reason}" if answer.reason else ""
            )
            events.append(ev.ActauthDecision(tool=call.name, decision="deny", reason=why))
            return events + self.deny(call, why, batch, args, by_user=True)
        try:
            kwargs = self.approved_values(pending, args, answer.args is not None, live)
        except ValueError as exc:  # the tool or the rules changed since the human decided
            why = f"{request.reason} — human approved, but {exc}"
            events.append(ev.ActauthDecision(tool=call.name, decision="deny", reason=why))
            return events + self.deny(call, why, batch, args)
        why = f"{request.reason} — human approved"
        events.append(ev.ActauthDecision(tool=call.name, decision="allow", reason=why))
        batch.scheduled.append(
            Scheduled(call=call, tool=tool, args=args, kwargs=kwargs, reason=why)
        )
        return events

    def approved_values(
        self, pending: Pending, args: dict[str, Any], edited: bool, live: bool
    ) -> Any:
        """The values an approved call runs on: those checked when it was asked or its edit
        was vetted (an edit put through the rules again when the batch resumes: they may have
        changed since); else (a batch resumed from the log) checked again now."""
        if pending.checked is not None and pending.checked[0] is args:
            if edited and not live:  # (a live edit was vetted just now)
                assert isinstance(pending.request, ApprovalRequest)
                vet_values(pending.tool, self.gate, pending.request.scope, pending.checked[1])
            return pending.checked[1]
        if holds_marker(args):  # read back from the log, which keeps no secret (P11)
            raise ValueError(
                "its arguments held a secret the log does not keep (they read "
                f"{MARKER!r} now), so it does not run; ask for it again in a live run"
            )
        if edited:
            assert isinstance(pending.request, ApprovalRequest)
            return vet_edit(pending.tool, self.gate, pending.request.scope, args)
        try:
            return pending.tool.validate(args)
        except ValueError as exc:
            raise ValueError(f"the arguments are no longer valid: {exc}") from None

    def deny(
        self,
        call: ToolCall,
        reason: str,
        batch: Batch,
        args: dict[str, Any],
        *,
        by_user: bool = False,
    ) -> list[ev.Event]:
        batch.denied.append(call.name)
        who = "by user" if by_user else "by policy"
        text = f"Tool call denied {who}. Reason: {reason}"
        return record(call, text, "Denied.", args=args, detail=reason)

    def rerun(self, checkpoint: Checkpoint, batch: Batch) -> list[ev.Event]:
        """The suspended calls of a resumed batch run again (their subagents resume), or are
        skipped with the batch when a denial closed it."""
        events: list[ev.Event] = []
        for waiting in checkpoint.suspended.values():
            call, tool, args = waiting.call, waiting.tool, waiting.args
            answers = dict(waiting.answers)
            for pending_id in waiting.pending_ids:
                item = checkpoint.pending.get(pending_id)
                if item is not None and isinstance(item.decision, Answer):
                    assert isinstance(item.request, QuestionRequest)
                    answers[item.request.question] = item.decision.text
            resumes = waiting.session_id if waiting.session_id != self.session_id else None
            why = RESUMED_CHILD if resumes else "resumed: its question was answered"
            if checkpoint.closed:
                why = "not resumed: a sibling call was denied"
            elif holds_marker(args):  # read back from the log, which keeps no secret (P11)
                why = f"not resumed: its arguments held a secret the log does not keep ({MARKER!r})"
                events.append(ev.ActauthDecision(tool=call.name, decision="deny", reason=why))
                events += self.deny(call, why, batch, args)
                continue
            else:
                events.append(ev.ActauthDecision(tool=call.name, decision="allow", reason=why))
            kwargs = {} if checkpoint.closed else tool.validate(args)
            batch.scheduled.append(
                Scheduled(
                    call=call,
                    tool=tool,
                    args=args,
                    kwargs=kwargs,
                    reason=why,
                    answers=answers,
                    resumes=resumes,
                )
            )
        return events

    def needs_answer(self, call: ToolCall, needs: NeedsAnswer) -> list[ev.Event]:
        """A running call that needs a person's answer (`NeedsAnswer`): its question, and the
        call suspended on it (it runs again, from the start, once the question is answered)."""
        kwargs = {"question": needs.question, "options": needs.options}
        events, pending = self.question(call, self.tools[call.name], kwargs)
        waits = [pending.request.id]
        suspended = ev.ToolSuspended(
            id=call.id, tool=call.name, session_id=self.session_id, pending_ids=waits
        )
        return [*events, suspended]

    def skip(self, batch: Batch) -> list[ev.Event]:
        """A denial stops the batch: every allowed or deferred call is skipped, unrun."""
        return self._skip(batch, [(s.call, s.args, s.reason) for s in batch.scheduled])

    def closed(self, batch: Batch) -> list[ev.Event]:
        """The run goes on after a denial (`on_deny: continue`), but the calls deferred before a
        human's denial are skipped: the denial closed their items."""
        return self._skip(Batch(denied=batch.denied, closed=batch.closed), [])

    def _skip(
        self, batch: Batch, skipped: list[tuple[ToolCall, dict[str, Any], str | None]]
    ) -> list[ev.Event]:
        events: list[ev.Event] = []
        text = f"Skipped: a sibling tool call in this turn ({', '.join(batch.denied)}) was denied."
        waiting = [*batch.closed.values(), *batch.deferred.values()]  # in request order
        skipped += [(p.request.call, p.request.call.args, None) for p in waiting]
        for call, args, reason in skipped:
            events.append(ev.LoopSkipped(name=call.name, denied_tools=batch.denied))
            events += record(call, text, "Skipped.", args=args, detail=reason)
        return events

    def recover(self, recovery: Recovery, batch: Batch, carry_over: str | None) -> list[ev.Event]:
        """The batch of a run that died: calls it had started of idempotent tools are scheduled
        to run again; every other call without a result is interrupted (one it started may
        have run: its result says so)."""
        missing = [c for c in recovery.calls if c.id not in recovery.results]
        args = {c.id: recovery.args.get(c.id, c.args) for c in missing}  # what each started on
        again = [  # never on arguments whose secrets the log redacted (P11)
            c
            for c in missing
            if c.id in recovery.started
            and self._idempotent(c.name, args[c.id])
            and not holds_marker(args[c.id])
        ]
        lost, rerun = [c.id for c in missing if c not in again], [c.id for c in again]
        ran = ev.RunInterrupted(interrupted_calls=lost, rerun_calls=rerun, carry_over=carry_over)
        events: list[ev.Event] = [ran]
        for call in missing:
            if call not in again:
                events.append(ev.ToolInterrupted(id=call.id, tool=call.name))
                text = MAY_HAVE_RUN if call.id in recovery.started else INTERRUPTED
                events += record(call, text, "Error.")
                continue
            reason = "re-run after an interruption: the tool is idempotent"
            tool, started = self.tools[call.name], args[call.id]  # (the arguments it started on)
            events.append(ev.ActauthDecision(tool=call.name, decision="allow", reason=reason))
            kwargs = tool.validate(started)
            batch.scheduled.append(
                Scheduled(call=call, tool=tool, args=started, kwargs=kwargs, reason=reason)
            )
        return events

    def _idempotent(self, name: str, args: dict[str, Any]) -> bool:
        tool = self.tools.get(name)
        if tool is None or not tool.idempotent:
            return False
        try:
            tool.validate(args)
        except ValueError:
            return False
        return True

    def abandon(self) -> list[ev.Event]:
        """The run ends while a human is being asked: close the announced approval."""
        if self.asking is None or isinstance(self.asking.request, QuestionRequest):
            self.asking = None
            return []
        request, self.asking = self.asking.request, None
        why = f"{request.reason} — run ended before a decision"
        return [ev.ActauthDecision(tool=request.call.name, decision="deny", reason=why)]
