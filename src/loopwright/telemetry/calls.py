"""The execute_tool spans of a run: one per call, from the gate's decision (or the approval it
asked for) to `tool:result`, `tool:suspended` or the run's end (see `spans`).

A call is known by its id once an event names it; the gate's decisions on a resumed batch come
without one, and are bound by the tool's name when the call runs. Its span opens as the call
starts (or as its first output or its end comes); attributes noted before go on it then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import events as ev
from .. import redact
from ..gate.batch import Checkpoint
from ..messages import ToolCall
from .content import dumps, error_kind, gate_reason

STATUS = {"Approved.": "ok", "Error.": "error", "Denied.": "denied", "Skipped.": "skipped"}


@dataclass(slots=True)
class CallSpan:
    """One tool call of the run, from the first event about it to its span's end."""

    name: str
    id: str | None
    start: int
    attributes: dict[str, Any] = field(default_factory=dict)
    span: Span | None = None
    error: str | None = None


class CallSpans:
    """The execute_tool spans of one run, under its span (`context`), each with the run's
    attributes (`common`) and registered in `running` (the spans of calls running now, by the
    session id a subagent's run of the call gets: its parent span, `Tracing.calls`).
    `known`: whether the agent offers a tool of this name (a name it does not is the model's
    text, content: left out of the span unless `capture`)."""

    def __init__(
        self,
        tracer: Any,
        context: Any,
        common: dict[str, Any],
        running: dict[str, Span],
        where: str,
        *,
        capture: bool,
        checkpoint: Checkpoint | None,
        known: Callable[[str], bool],
    ) -> None:
        self.tracer, self.context, self.common, self.running = tracer, context, common, running
        self.where = where  # `<tenant>\n<session id>`: what a call's `key` starts with
        self.capture, self.known = capture, known
        self.queued: deque[ToolCall] = deque()  # the reply's calls the gate has not decided yet
        self.calls: dict[str, CallSpan] = {}  # by call id
        self.unbound: list[CallSpan] = []  # decided in a resumed batch: bound by name when they run
        self.pending: dict[str, str] = {}  # pending item id → call id
        self.asked_at: dict[str, int] = {}  # approval id → when it was asked
        if checkpoint is not None:  # a paused batch resumes: its calls are decided again
            self.queued.extend(c for c in checkpoint.calls if c.id not in checkpoint.results)
            for pending_id, item in checkpoint.pending.items():
                self.pending[pending_id] = item.request.call.id

    def call(self, call_id: str, name: str, now: int) -> CallSpan:
        """The call with this id: known, or decided without an id (a resumed batch), or new."""
        call = self.calls.get(call_id)
        if call is None:
            bound = next((c for c in self.unbound if c.name == name), None)
            if bound is not None:
                self.unbound.remove(bound)
                bound.id = call_id
                call = bound
            else:
                call = CallSpan(name, call_id, now)
            self.calls[call_id] = call
        elif not call.name:
            call.name = name
        return call

    def asked(self, event: ev.ApprovalPending, now: int) -> None:
        self.asked_at[event.id] = now

    def requested(self, event: ev.PendingRequested, now: int) -> None:
        self.pending[event.id] = event.call_id
        name = next((c.name for c in self.queued if c.id == event.call_id), "")
        call = self.call(event.call_id, name, self.asked_at.pop(event.id, now))
        kind = event.kind
        note(call, {f"loopwright.{kind}.id": event.id, f"loopwright.{kind}.decision": "pending"})

    def resolved(self, event: ev.ApprovalResolved, now: int) -> None:
        call_id = self.pending.get(event.id)
        if call_id is None:
            return
        call = self.call(call_id, event.tool, now)
        note(
            call,
            {
                "loopwright.approval.id": event.id,
                "loopwright.approval.decision": event.decision,
                "loopwright.approval.by": event.by,
            },
        )

    def answered(self, event: ev.QuestionResolved, now: int) -> None:
        call_id = self.pending.get(event.id)
        if call_id is not None and call_id in self.calls:
            answered = {
                "loopwright.question.decision": "answered",
                "loopwright.question.by": event.by,
            }
            note(self.calls[call_id], answered)

    def decided(self, event: ev.ActauthDecision, now: int) -> None:
        queued = next((c for c in self.queued if c.name == event.tool), None)
        if queued is not None:  # decisions come in the model's order of the calls
            self.queued.remove(queued)
            call = self.call(queued.id, queued.name, now)
        else:
            call = CallSpan(event.tool, None, now)
            self.unbound.append(call)
        reason = redact.text(event.reason) if self.capture else gate_reason(event.reason)
        gate = {"loopwright.gate.decision": event.decision}
        note(call, gate if reason is None else {**gate, "loopwright.gate.reason": reason})

    def open(self, call: CallSpan, args: dict[str, Any] | None) -> Span:
        if call.span is None:
            named = self.capture or self.known(call.name)
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                **({"gen_ai.tool.name": call.name} if named else {}),
                "gen_ai.tool.call.id": call.id or "",
                "gen_ai.tool.type": "function",
                **self.common,
                **call.attributes,
            }
            if self.capture and args is not None:
                attributes["gen_ai.tool.call.arguments"] = dumps(args)
            call.span = self.tracer.start_span(
                f"execute_tool {call.name}" if named else "execute_tool",
                context=self.context,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=call.start,
            )
            self.running[self.key(call)] = call.span
        return call.span

    def key(self, call: CallSpan) -> str:
        """Where a subagent's run of `call` finds its parent span: by the session id it gets,
        within this tenant."""
        return f"{self.where}/{call.name}/{call.id}"

    def started(self, event: ev.ToolStarted, now: int) -> None:
        self.open(self.call(event.id, event.tool, now), event.args)

    def output(self, event: ev.ToolOutput, now: int) -> None:
        call = self.call(event.id, event.tool, now)
        span = self.open(call, None)
        if event.is_error:
            call.error = event.content
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", redact.text(event.content))

    def interrupted(self, event: ev.ToolInterrupted, now: int) -> None:
        note(self.call(event.id, event.tool, now), {"loopwright.tool.interrupted": True})

    def result(self, event: ev.ToolResult, now: int) -> None:
        call = self.call(event.id, event.tool, now)
        if self.capture and event.args is not None:  # the arguments the call ran with
            self.open(call, None).set_attribute("gen_ai.tool.call.arguments", dumps(event.args))
        status = STATUS.get(event.status_text, event.status_text)
        self.finish(call, status, now, error=status == "error")

    def suspended(self, event: ev.ToolSuspended, now: int) -> None:
        call = self.call(event.id, event.tool, now)
        note(call, {"loopwright.tool.waits_on": event.session_id})
        self.finish(call, "suspended", now)

    def finish(self, call: CallSpan, status: str, now: int, *, error: bool = False) -> None:
        span = self.open(call, None)
        span.set_attribute("loopwright.tool.status", status)
        if error:  # the error's text is content: without capture, its kind describes it
            kind = error_kind(call.error)
            span.set_attribute("error.type", kind)
            text = redact.text(call.error or "")[:1000] if self.capture else kind
            span.set_status(Status(StatusCode.ERROR, text))
        span.end(end_time=now)
        self.running.pop(self.key(call), None)
        if call.id is not None:
            self.calls.pop(call.id, None)

    def end(self, done: bool, now: int) -> None:
        """The run ended (`done`: with its `done`): the calls left open end, asked and paused,
        or cut off."""
        for call in [*self.calls.values(), *self.unbound]:
            self.finish(call, "pending" if done else "interrupted", now)


HANDLERS: dict[type, Callable[[CallSpans, Any, int], None]] = {
    ev.ApprovalPending: CallSpans.asked,
    ev.PendingRequested: CallSpans.requested,
    ev.ApprovalResolved: CallSpans.resolved,
    ev.QuestionResolved: CallSpans.answered,
    ev.ActauthDecision: CallSpans.decided,
    ev.ToolStarted: CallSpans.started,
    ev.ToolOutput: CallSpans.output,
    ev.ToolInterrupted: CallSpans.interrupted,
    ev.ToolResult: CallSpans.result,
    ev.ToolSuspended: CallSpans.suspended,
}
"""What each event about a call does to the run's tool spans."""


def note(call: CallSpan, attributes: dict[str, Any]) -> None:
    """Attributes of a call: on its span when it is open, else on the span it will open."""
    call.attributes.update(attributes)
    if call.span is not None:
        call.span.set_attributes(attributes)
