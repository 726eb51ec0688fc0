"""Spans of a run, made from its events (OpenTelemetry GenAI semantic conventions).

One `RunSpans` per run (an observer: `loopwright.loop.observers`) sees every event of it in the
run's task and makes:

    invoke_agent <agent>        the run (INTERNAL); under the caller's current span, or under the
                                execute_tool span of the parent's call when it is a subagent's run
      chat <model>              one per model request (CLIENT): step:started to message:completed
      execute_tool <tool>       one per call (INTERNAL): from the gate's decision (or the approval
                                it asked for) to tool:result, tool:suspended or the run's end

Events carry no timestamps, so each is stamped as it arrives, and spans are made with explicit
start and end times once what they describe is known (a chat span when its reply is complete).
Attributes: `gen_ai.*` of the conventions; the session id as `gen_ai.conversation.id` and the
tenant as `loopwright.tenant` on every span; `loopwright.gate.decision` and `.reason`, the
human's `loopwright.approval.*` and the outcome `loopwright.tool.status` on tool spans. Content
(`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.tool.call.arguments`,
`gen_ai.tool.call.result`) only when opted in. A failure here is logged and ends the run's
tracing, never the run.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from time import time_ns
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import events as ev
from .. import redact
from ..messages import AssistantMessage, Message, Text, ToolCall, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from ..loop.driver import Run
    from ..loop.session import Session

log = logging.getLogger("loopwright.telemetry")

STATUS = {"Approved.": "ok", "Error.": "error", "Denied.": "denied", "Skipped.": "skipped"}
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length"}
_RAISED = re.compile(r"^Tool '.*?' failed: ([A-Za-z_][\w.]*): ", re.DOTALL)


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("loopwright")
    except Exception:
        return None


class Tracing:
    """What every run's spans share: the tracer, the content switch, and the execute_tool spans
    of calls running now, by the session id a subagent's run of that call gets."""

    def __init__(self, provider: Any, *, capture_content: bool) -> None:
        self.tracer = provider.get_tracer("loopwright", _version())
        self.capture = capture_content
        self.calls: dict[str, Span] = {}
        """`<session>/<tool>/<call id>` → the call's execute_tool span (subagents.py names a
        child's session so)."""

    def observe(self, run: Run, session: Session | None) -> Callable[[ev.Event | None], None]:
        """The observer of one run (`loopwright.loop.observers`); one that ignores it if that fails."""
        try:
            return RunSpans(self, run, session)
        except Exception:
            log.warning("telemetry: the spans of run %s failed", run.session_id, exc_info=True)
            return _ignore


def _ignore(event: ev.Event | None) -> None:
    pass


@dataclass(slots=True)
class _CallSpan:
    """One tool call of the run, from the first event about it to its span's end."""

    name: str
    id: str | None
    start: int
    attributes: dict[str, Any] = field(default_factory=dict)
    span: Span | None = None
    error: str | None = None


class RunSpans:
    """The spans of one run, made as its events arrive; called with None as its task ends."""

    def __init__(self, tracing: Tracing, run: Run, session: Session | None) -> None:
        self.tracing, self.capture = tracing, tracing.capture
        self.session = session
        self.session_id = run.session_id
        self.tenant = session.tenant if session is not None else ""
        agent = session.agent if session is not None else None
        self.agent_name = agent.name if agent is not None else "agent"
        spec = agent.model if agent is not None and isinstance(agent.model, str) else None
        self.request_model = spec
        self.common: dict[str, Any] = {"gen_ai.conversation.id": run.session_id}
        if session is not None:
            self.common["loopwright.tenant"] = session.tenant
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent_name,
            **self.common,
        }
        if session is not None:
            attributes["loopwright.environment"] = session.environment
        if agent is not None and agent.description:
            attributes["gen_ai.agent.description"] = agent.description
        if spec is not None:
            attributes.update(_model_attributes(spec, "request"))
        here = f"{self.tenant}\n{run.session_id}"  # (another tenant's ids are no kin of ours)
        parent = tracing.calls.get(here)  # a subagent's run: its call's span
        if parent is None and "~" in here:  # (`…/<call id>~2`: the id used again)
            parent = tracing.calls.get(here.rsplit("~", 1)[0])
        where = (
            trace.set_span_in_context(parent) if parent is not None else otel_context.get_current()
        )
        self.span = tracing.tracer.start_span(
            f"invoke_agent {self.agent_name}",
            context=where,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=time_ns(),
        )
        self.context = trace.set_span_in_context(self.span)
        self.step_start: int | None = None
        self.retries = 0
        self.chat_input: str | None = None
        self.queued: deque[ToolCall] = deque()  # the reply's calls the gate has not decided yet
        self.calls: dict[str, _CallSpan] = {}  # by call id
        self.unbound: list[
            _CallSpan
        ] = []  # decided in a resumed batch: bound by name when they run
        self.pending: dict[str, str] = {}  # pending item id → call id
        self.asked: dict[str, int] = {}  # approval id → when it was asked
        checkpoint = session.state.checkpoint if session is not None else None
        if checkpoint is not None:  # a paused batch resumes: its calls are decided again
            self.queued.extend(c for c in checkpoint.calls if c.id not in checkpoint.results)
            for pending_id, item in checkpoint.pending.items():
                self.pending[pending_id] = item.request.call.id
        self.input_tokens = self.output_tokens = 0
        self.ended = False

    def __call__(self, event: ev.Event | None) -> None:
        if self.ended:
            return
        try:
            if event is None:
                self._end(None, time_ns())
                return
            handler = _HANDLERS.get(type(event))
            if handler is not None:
                handler(self, event, time_ns())
        except Exception:
            log.warning("telemetry: the spans of run %s failed", self.session_id, exc_info=True)
            self._abandon()

    def _abandon(self) -> None:
        """Stop tracing this run after a failure here: what is open ends, marked so."""
        self.ended = True
        for call in self.calls.values():
            self.tracing.calls.pop(self._key(call), None)
        failed = Status(StatusCode.ERROR, "loopwright telemetry failed (see its log)")
        for span in [*(c.span for c in self.calls.values() if c.span is not None), self.span]:
            try:
                span.set_status(failed)
                span.end()
            except Exception:  # pragma: no cover - the SDK's own failure: nothing more to do
                pass

    # ---- the model's requests --------------------------------------------------------------

    def _step(self, event: ev.StepStarted, now: int) -> None:
        self.step_start, self.retries = now, 0
        if self.capture and self.session is not None:
            self.chat_input = _dumps([_message(m) for m in self.session.history.messages])

    def _retry(self, event: ev.ModelRetry, now: int) -> None:
        self.retries += 1

    def _fallback(self, event: ev.ModelFallback, now: int) -> None:
        self.retries += 1  # the request is sent again, to the fallback model
        self.request_model = event.to  # which the rest of the run asks

    def _reply(self, event: ev.MessageCompleted, now: int) -> None:
        message = event.message
        self._chat(now, message)
        self.queued = deque(message.tool_calls)

    def _chat(self, now: int, message: AssistantMessage | None, error: str | None = None) -> None:
        start, self.step_start = self.step_start, None
        request = self.request_model or (message.model if message is not None else None)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", **self.common}
        if request is not None:
            attributes.update(_model_attributes(request, "request"))
        if self.retries:
            attributes["loopwright.model.retries"] = self.retries
        if message is not None:
            if message.model is not None:
                attributes.update(_model_attributes(message.model, "response"))
            reason = message.stop_reason
            attributes["gen_ai.response.finish_reasons"] = [FINISH_REASONS.get(reason, reason)]
            if message.usage is not None:
                attributes["gen_ai.usage.input_tokens"] = message.usage.input_tokens
                attributes["gen_ai.usage.output_tokens"] = message.usage.output_tokens
            if self.capture:
                output = {**_message(message), "finish_reason": FINISH_REASONS.get(reason, reason)}
                attributes["gen_ai.output.messages"] = _dumps([output])
        if self.capture and self.chat_input is not None:
            attributes["gen_ai.input.messages"] = self.chat_input
        self.chat_input = None
        if error is not None:
            attributes["error.type"] = error
        name = _model_attributes(request, "request")["gen_ai.request.model"] if request else ""
        span = self.tracing.tracer.start_span(
            f"chat {name}".rstrip(),
            context=self.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=now if start is None else start,
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=now)

    def _usage(self, event: ev.StepFinished, now: int) -> None:
        if event.usage is not None:
            self.input_tokens += event.usage.input_tokens
            self.output_tokens += event.usage.output_tokens

    # ---- tool calls ------------------------------------------------------------------------

    def _call(self, call_id: str, name: str, now: int) -> _CallSpan:
        """The call with this id: known, or decided without an id (a resumed batch), or new."""
        call = self.calls.get(call_id)
        if call is None:
            bound = next((c for c in self.unbound if c.name == name), None)
            if bound is not None:
                self.unbound.remove(bound)
                bound.id = call_id
                call = bound
            else:
                call = _CallSpan(name, call_id, now)
            self.calls[call_id] = call
        elif not call.name:
            call.name = name
        return call

    def _asked(self, event: ev.ApprovalPending, now: int) -> None:
        self.asked[event.id] = now

    def _requested(self, event: ev.PendingRequested, now: int) -> None:
        self.pending[event.id] = event.call_id
        name = next((c.name for c in self.queued if c.id == event.call_id), "")
        call = self._call(event.call_id, name, self.asked.pop(event.id, now))
        kind = event.kind
        _note(call, {f"loopwright.{kind}.id": event.id, f"loopwright.{kind}.decision": "pending"})

    def _resolved(self, event: ev.ApprovalResolved, now: int) -> None:
        call_id = self.pending.get(event.id)
        if call_id is None:
            return
        call = self._call(call_id, event.tool, now)
        _note(
            call,
            {
                "loopwright.approval.id": event.id,
                "loopwright.approval.decision": event.decision,
                "loopwright.approval.by": event.by,
            },
        )

    def _answered(self, event: ev.QuestionResolved, now: int) -> None:
        call_id = self.pending.get(event.id)
        if call_id is not None and call_id in self.calls:
            answered = {
                "loopwright.question.decision": "answered",
                "loopwright.question.by": event.by,
            }
            _note(self.calls[call_id], answered)

    def _decided(self, event: ev.ActauthDecision, now: int) -> None:
        queued = next((c for c in self.queued if c.name == event.tool), None)
        if queued is not None:  # decisions come in the model's order of the calls
            self.queued.remove(queued)
            call = self._call(queued.id, queued.name, now)
        else:
            call = _CallSpan(event.tool, None, now)
            self.unbound.append(call)
        reason = redact.text(event.reason)
        gate = {"loopwright.gate.decision": event.decision, "loopwright.gate.reason": reason}
        _note(call, gate)

    def _open(self, call: _CallSpan, args: dict[str, Any] | None) -> Span:
        if call.span is None:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id or "",
                "gen_ai.tool.type": "function",
                **self.common,
                **call.attributes,
            }
            if self.capture and args is not None:
                attributes["gen_ai.tool.call.arguments"] = _dumps(args)
            call.span = self.tracing.tracer.start_span(
                f"execute_tool {call.name}",
                context=self.context,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=call.start,
            )
            self.tracing.calls[self._key(call)] = call.span
        return call.span

    def _key(self, call: _CallSpan) -> str:
        """Where a subagent's run of `call` finds its parent span: by the session id it gets,
        within this tenant."""
        return f"{self.tenant}\n{self.session_id}/{call.name}/{call.id}"

    def _started(self, event: ev.ToolStarted, now: int) -> None:
        self._open(self._call(event.id, event.tool, now), event.args)

    def _output(self, event: ev.ToolOutput, now: int) -> None:
        call = self._call(event.id, event.tool, now)
        span = self._open(call, None)
        if event.is_error:
            call.error = event.content
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", redact.text(event.content))

    def _interrupted(self, event: ev.ToolInterrupted, now: int) -> None:
        _note(self._call(event.id, event.tool, now), {"loopwright.tool.interrupted": True})

    def _result(self, event: ev.ToolResult, now: int) -> None:
        call = self._call(event.id, event.tool, now)
        if self.capture and event.args is not None:  # the arguments the call ran with
            self._open(call, None).set_attribute("gen_ai.tool.call.arguments", _dumps(event.args))
        status = STATUS.get(event.status_text, event.status_text)
        self._finish(call, status, now, error=status == "error")

    def _suspended(self, event: ev.ToolSuspended, now: int) -> None:
        call = self._call(event.id, event.tool, now)
        _note(call, {"loopwright.tool.waits_on": event.session_id})
        self._finish(call, "suspended", now)

    def _finish(self, call: _CallSpan, status: str, now: int, *, error: bool = False) -> None:
        span = self._open(call, None)
        span.set_attribute("loopwright.tool.status", status)
        if error:
            found = _RAISED.match(call.error or "")
            kind = found.group(1) if found else "tool_error"
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, redact.text(call.error or "")[:1000]))
        span.end(end_time=now)
        self.tracing.calls.pop(self._key(call), None)
        if call.id is not None:
            self.calls.pop(call.id, None)

    # ---- the run's end ---------------------------------------------------------------------

    def _done(self, event: ev.Done, now: int) -> None:
        self._end(event, now)

    def _end(self, done: ev.Done | None, now: int) -> None:
        """Close what is open (a request cut off, calls left pending), then the run's span."""
        self.ended = True
        if self.step_start is not None:
            self._chat(now, None, error="aborted" if done is None else done.stop_reason)
        for call in [*self.calls.values(), *self.unbound]:  # asked and paused, or cut off
            self._finish(call, "pending" if done is not None else "interrupted", now)
        span = self.span
        span.set_attribute("gen_ai.usage.input_tokens", self.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", self.output_tokens)
        if done is None:  # the task ended without its `done` (its log failed)
            span.set_attribute("error.type", "interrupted")
            span.set_status(Status(StatusCode.ERROR, "the run ended without its done"))
        else:
            span.set_attribute("loopwright.stop_reason", done.stop_reason)
            if done.stop_reason == "error":
                span.set_attribute("error.type", "loop_error")
                span.set_status(Status(StatusCode.ERROR, redact.text(done.text)[:1000]))
            if self.capture:
                output = {"role": "assistant", "parts": [_text(done.text)]}
                span.set_attribute("gen_ai.output.messages", _dumps([output]))
        span.end(end_time=now)

    def _input(self, event: ev.InputReceived, now: int) -> None:
        if self.capture:
            self.span.set_attribute("gen_ai.input.messages", _dumps([_message(event.message)]))


_HANDLERS: dict[type, Callable[[RunSpans, Any, int], None]] = {
    ev.InputReceived: RunSpans._input,
    ev.StepStarted: RunSpans._step,
    ev.ModelRetry: RunSpans._retry,
    ev.ModelFallback: RunSpans._fallback,
    ev.MessageCompleted: RunSpans._reply,
    ev.StepFinished: RunSpans._usage,
    ev.ApprovalPending: RunSpans._asked,
    ev.PendingRequested: RunSpans._requested,
    ev.ApprovalResolved: RunSpans._resolved,
    ev.QuestionResolved: RunSpans._answered,
    ev.ActauthDecision: RunSpans._decided,
    ev.ToolStarted: RunSpans._started,
    ev.ToolOutput: RunSpans._output,
    ev.ToolInterrupted: RunSpans._interrupted,
    ev.ToolResult: RunSpans._result,
    ev.ToolSuspended: RunSpans._suspended,
    ev.Done: RunSpans._done,
}


def _note(call: _CallSpan, attributes: dict[str, Any]) -> None:
    """Attributes of a call: on its span when it is open, else on the span it will open."""
    call.attributes.update(attributes)
    if call.span is not None:
        call.span.set_attributes(attributes)


def _model_attributes(spec: str, kind: str) -> dict[str, Any]:
    """`provider:model` as the conventions' attributes (`kind`: request or response)."""
    provider, _, model = spec.partition(":")
    if not model:
        return {f"gen_ai.{kind}.model": spec}
    return {"gen_ai.provider.name": provider, f"gen_ai.{kind}.model": model}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def _message(message: Message) -> dict[str, Any]:
    """A history message in the conventions' shape (role and parts)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "parts": [_text(message.content)]}
    if isinstance(message, ToolResultMessage):
        part = {"type": "tool_call_response", "id": message.call_id, "response": message.content}
        return {"role": "tool", "parts": [part]}
    parts: list[dict[str, Any]] = []
    for p in message.parts:
        if isinstance(p, Text):
            parts.append(_text(p.text))
        elif isinstance(p, ToolCall):
            parts.append({"type": "tool_call", "id": p.id, "name": p.name, "arguments": p.args})
        else:
            parts.append({"type": "reasoning", "content": p.text})
    return {"role": "assistant", "parts": parts}


def _dumps(value: Any) -> str:
    """Captured content as JSON, its secrets redacted (P11: opting in to content is not
    opting in to keys)."""
    return redact.json_text(json.dumps(value, ensure_ascii=False, default=str))
