"""The Responses dialect (`openai-responses`): OpenAI's `/v1/responses`, streaming and stateless
(`store=False`: the whole conversation is sent each time, as with every other dialect).

Three jobs, as for every dialect: our messages and tools to input items, named SSE events to our
events, and the final status to our stop reason. On the wire a reply is a series of output items
(`reasoning`, `message`, `function_call`), each announced by `response.output_item.added` and
filled by deltas (`response.output_text.delta`, `response.reasoning_summary_text.delta`,
`response.function_call_arguments.delta`, ...); one of `response.completed`,
`response.incomplete` or `response.failed` (or an `error` event) ends it.

Failures are data (SPEC §3.8): an SDK error, a failed response, a stream that ends before its
final event, or tool arguments that are not a JSON object end the stream with a `ModelFailure`.
Vendor SDK types never leave this module.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from openai import AsyncStream
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

from ..events import TextDelta, ThinkingDelta
from ..loop.replies import wire_text
from ..messages import AssistantMessage, StopReason, Thinking, ToolResultMessage, Usage
from ..model_settings import ModelSettings, resolve
from ..models import ModelFailure, ModelRequest, StreamItem
from . import _attachments, _settings
from ._errors import TOO_LONG, failure_from
from ._openai_common import CUT, OpenAIClientModel, ReplyParts, ToolCallBuffer, notes_text, relay
from ._signatures import of_responses, responses_item

RETRYABLE_CODES = ("server_error", "rate_limit")
"""Error codes (as substrings) of a failed response that a retry may cure."""


class OpenAIResponsesModel(OpenAIClientModel):
    """A model behind a Responses endpoint. Never raises for API failures."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one reply: deltas, then one `MessageCompleted` or one `ModelFailure`."""
        params = self.params(request)  # settings it cannot take raise here, before the request
        try:
            events = cast(
                "AsyncStream[ResponseStreamEvent]",
                await self.request(lambda c: c.responses.create(**params)),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            yield failure_from(exc)
            return
        reader = _ResponsesReader()
        async for item in relay(events, reader.read, lambda: reader.end is not None):
            yield item
            if isinstance(item, ModelFailure):
                return
        if isinstance(reader.end, ModelFailure):
            yield reader.end
        elif reader.end is None:
            yield ModelFailure(error=CUT, retryable=True)
        else:
            yield reader.parts.complete(reader.end, reader.usage, model=self.model, name=self.name)

    def _fields(self, settings: ModelSettings, session: str | None) -> _settings.Fields:
        return _settings.openai_responses(
            settings, model=self.name, endpoint=self.endpoint.name, session=session
        )

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (as SDK keyword arguments; `extra_body` is merged over it)."""
        settings = resolve(request.settings, request.max_output_tokens)
        fields, extra = self._fields(settings, request.session_id)
        _attachments.check(self.name, request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "input": to_input(request),
            "stream": True,
            "store": False,
        }
        if request.system:
            params["instructions"] = request.system
        if request.tools:
            # `strict` defaults to true here, which would reject ordinary optional parameters
            params["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
        params.update(fields)
        output = request.output
        if output is not None:
            shape = {"name": output.name, "schema": output.schema, "strict": output.strict}
            params["text"] = {"format": {"type": "json_schema", **shape}}
        if extra:
            params["extra_body"] = extra
        return params


def to_input(request: ModelRequest) -> list[dict[str, Any]]:
    """Our conversation as Responses input items; reasoning goes back only as the reasoning
    items it came as (their encrypted content: the request is stateless)."""
    items: list[dict[str, Any]] = []
    results: list[ToolResultMessage] = []  # the batch's, whose images follow it
    for message in request.messages:
        if not isinstance(message, ToolResultMessage) and results:
            items.extend(filter(None, [_attachments.responses_tool_images(results)]))
            results = []
        if isinstance(message, AssistantMessage):
            items.extend(_reasoning_items(message))
            if message.text:
                items.append({"role": "assistant", "content": message.text})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": json.dumps(c.args),
                }
                for c in message.tool_calls
            )
        elif isinstance(message, ToolResultMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.call_id,
                    "output": message.content,
                }
            )
            results.append(message)
        else:
            items.append(_attachments.responses_user(message))
    items.extend(filter(None, [_attachments.responses_tool_images(results)]))
    notes = notes_text(request)
    if notes is not None:
        items.append({"role": "user", "content": notes})
    return items


def _reasoning_items(message: AssistantMessage) -> list[dict[str, Any]]:
    items = []
    for part in message.parts:
        if isinstance(part, Thinking) and (kept := responses_item(part.signature)) is not None:
            summary = [{"type": "summary_text", "text": part.text}] if part.text else []
            items.append({"type": "reasoning", **kept, "summary": summary})
    return items


class _ResponsesReader:
    """Turns events into our deltas and remembers what the final message needs."""

    def __init__(self) -> None:
        self.parts = ReplyParts()
        self.calls: dict[str, ToolCallBuffer] = {}
        """Function calls by output item id (deltas name the item, results name the call id)."""
        self.usage: Usage | None = None
        self.end: StopReason | ModelFailure | None = None

    def read(self, event: ResponseStreamEvent) -> Iterator[StreamItem]:
        if isinstance(event, ResponseTextDeltaEvent | ResponseRefusalDeltaEvent):
            if event.delta:
                self.parts.text.append(event.delta)
                yield TextDelta(delta=event.delta)
        elif isinstance(
            event, ResponseReasoningSummaryTextDeltaEvent | ResponseReasoningTextDeltaEvent
        ):
            if event.delta:
                self.parts.thinking.append(event.delta)
                yield ThinkingDelta(delta=event.delta)
        elif isinstance(event, ResponseOutputItemAddedEvent):
            if isinstance(event.item, ResponseFunctionToolCall):
                yield self._call(event.item).feed(event.item.arguments or "")
        elif isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            buffer = self.calls.get(event.item_id)
            if buffer is not None:
                yield buffer.feed(event.delta)
        elif isinstance(event, ResponseFunctionCallArgumentsDoneEvent):
            buffer = self.calls.get(event.item_id)
            if buffer is not None and event.arguments:
                buffer.arguments = event.arguments
        elif isinstance(event, ResponseOutputItemDoneEvent):
            if isinstance(event.item, ResponseFunctionToolCall) and event.item.arguments:
                self._call(event.item).arguments = event.item.arguments
            elif isinstance(event.item, ResponseReasoningItem):
                self.parts.reasoning.append(_thinking(event.item))
        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            self.usage = _usage(event.response)
            self.end = _stop_reason(event.response, self.parts)
        elif isinstance(event, ResponseFailedEvent):
            error = event.response.error
            code = error.code if error else None
            self.end = _failure(code, error.message if error else "the response failed")
        elif isinstance(event, ResponseErrorEvent):
            self.end = _failure(event.code, event.message)

    def _call(self, item: ResponseFunctionToolCall) -> ToolCallBuffer:
        key = item.id or item.call_id
        buffer = self.calls.get(key)
        if buffer is None:
            buffer = ToolCallBuffer(id=wire_text(item.call_id), name=wire_text(item.name))
            self.calls[key] = buffer
            self.parts.calls.append(buffer)
        return buffer


def _thinking(item: ResponseReasoningItem) -> Thinking:
    """A finished reasoning item: its summary (or its text), and what sends it back."""
    text = "".join(s.text for s in item.summary) or "".join(c.text for c in item.content or ())
    secret = item.encrypted_content
    return Thinking(text=text, signature=of_responses(item.id, secret) if secret else None)


def _stop_reason(response: Response, parts: ReplyParts) -> StopReason:
    details = response.incomplete_details
    if response.status == "incomplete" and details and details.reason == "max_output_tokens":
        return "max_tokens"
    return "tool_use" if parts.calls else "end_turn"


def _failure(code: str | None, message: str) -> ModelFailure:
    text = f"{code}: {message}" if code else message
    if TOO_LONG.search(message) or code == "context_length_exceeded":
        return ModelFailure(error=f"prompt too long: {text}", prompt_too_long=True)
    retryable = code is not None and any(c in code for c in RETRYABLE_CODES)
    return ModelFailure(error=text, retryable=retryable)


def _usage(response: Response) -> Usage | None:
    usage = response.usage
    if usage is None:
        return None
    details = getattr(usage, "input_tokens_details", None)
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=getattr(details, "cached_tokens", None) or 0,
        cache_write_tokens=getattr(details, "cache_write_tokens", None) or 0,
    )
