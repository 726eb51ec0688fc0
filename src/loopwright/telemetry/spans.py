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
`gen_ai.tool.call.result`, the texts of errors) only when opted in (`content`): without it, a
failure's status says its kind. A failure here is logged and ends the run's tracing, never the
run. The execute_tool spans are made by `calls.CallSpans`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from time import time_ns
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import events as ev
from .. import redact
from ..messages import AssistantMessage
from . import calls
from .calls import CallSpans
from .content import dumps, message_of, text_part

if TYPE_CHECKING:
    from ..loop.observers import ObservedRun, ObservedSession

log = logging.getLogger("loopwright.telemetry")

FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length"}


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

    def observe(
        self, run: ObservedRun, session: ObservedSession | None
    ) -> Callable[[ev.Event | None], None]:
        """The observer of one run (`loopwright.loop.observers`); one that ignores it if that fails."""
        try:
            return RunSpans(self, run, session)
        except Exception:
            log.warning("telemetry: the spans of run %s failed", run.session_id, exc_info=True)
            return _ignore


def _ignore(event: ev.Event | None) -> None:
    pass


class RunSpans:
    """The spans of one run, made as its events arrive; called with None as its task ends."""

    def __init__(self, tracing: Tracing, run: ObservedRun, session: ObservedSession | None) -> None:
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
        checkpoint = session.state.checkpoint if session is not None else None
        self.tools = CallSpans(
            tracing.tracer,
            self.context,
            self.common,
            tracing.calls,
            here,
            capture=self.capture,
            checkpoint=checkpoint,
            known=lambda name: agent is not None and agent.find_tool(name) is not None,
        )
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
            elif (on_call := calls.HANDLERS.get(type(event))) is not None:
                on_call(self.tools, event, time_ns())
        except Exception:
            log.warning("telemetry: the spans of run %s failed", self.session_id, exc_info=True)
            self._abandon()

    def _abandon(self) -> None:
        """Stop tracing this run after a failure here: what is open ends, marked so."""
        self.ended = True
        tools = self.tools
        for call in tools.calls.values():
            self.tracing.calls.pop(tools.key(call), None)
        failed = Status(StatusCode.ERROR, "loopwright telemetry failed (see its log)")
        for span in [*(c.span for c in tools.calls.values() if c.span is not None), self.span]:
            try:
                span.set_status(failed)
                span.end()
            except Exception:  # pragma: no cover - the SDK's own failure: nothing more to do
                pass

    # ---- the model's requests --------------------------------------------------------------

    def _step(self, event: ev.StepStarted, now: int) -> None:
        self.step_start, self.retries = now, 0
        if self.capture and self.session is not None:
            self.chat_input = dumps([message_of(m) for m in self.session.history.messages])

    def _retry(self, event: ev.ModelRetry, now: int) -> None:
        self.retries += 1

    def _fallback(self, event: ev.ModelFallback, now: int) -> None:
        self.retries += 1  # the request is sent again, to the fallback model
        self.request_model = event.to  # which the rest of the run asks

    def _reply(self, event: ev.MessageCompleted, now: int) -> None:
        message = event.message
        self._chat(now, message)
        self.tools.queued = deque(message.tool_calls)

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
                output = {
                    **message_of(message),
                    "finish_reason": FINISH_REASONS.get(reason, reason),
                }
                attributes["gen_ai.output.messages"] = dumps([output])
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

    # ---- the run's end ---------------------------------------------------------------------

    def _done(self, event: ev.Done, now: int) -> None:
        self._end(event, now)

    def _end(self, done: ev.Done | None, now: int) -> None:
        """Close what is open (a request cut off, calls left pending), then the run's span."""
        self.ended = True
        if self.step_start is not None:
            self._chat(now, None, error="aborted" if done is None else done.stop_reason)
        self.tools.end(done is not None, now)
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
                text = redact.text(done.text)[:1000] if self.capture else "loop_error"
                span.set_status(Status(StatusCode.ERROR, text))  # (its text is content)
            if self.capture:
                output = {"role": "assistant", "parts": [text_part(done.text)]}
                span.set_attribute("gen_ai.output.messages", dumps([output]))
        span.end(end_time=now)

    def _input(self, event: ev.InputReceived, now: int) -> None:
        if self.capture:
            self.span.set_attribute("gen_ai.input.messages", dumps([message_of(event.message)]))


_HANDLERS: dict[type, Callable[[RunSpans, Any, int], None]] = {
    ev.InputReceived: RunSpans._input,
    ev.StepStarted: RunSpans._step,
    ev.ModelRetry: RunSpans._retry,
    ev.ModelFallback: RunSpans._fallback,
    ev.MessageCompleted: RunSpans._reply,
    ev.StepFinished: RunSpans._usage,
    ev.Done: RunSpans._done,
}


def _model_attributes(spec: str, kind: str) -> dict[str, Any]:
    """`provider:model` as the conventions' attributes (`kind`: request or response)."""
    provider, _, model = spec.partition(":")
    if not model:
        return {f"gen_ai.{kind}.model": spec}
    return {"gen_ai.provider.name": provider, f"gen_ai.{kind}.model": model}
