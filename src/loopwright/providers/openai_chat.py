"""The Chat Completions dialect (`openai-chat`): OpenAI and every OpenAI-compatible server
(DeepSeek, Ollama, vLLM, llama.cpp, OpenRouter, ...), streaming.

Three jobs, as for every dialect: our messages and tools to the wire format, wire chunks to our
events, and the finish reason to our stop reason. On the wire a reply is a run of
`chat.completion.chunk`s: `delta.content` is text, `delta.reasoning_content` (DeepSeek) or
`delta.reasoning` (OpenRouter, vLLM) is thinking, and tool calls arrive as fragments keyed by
`index`, only the first carrying the id and name. `finish_reason` ends the choice and, with
`stream_options.include_usage`, one last chunk with no choices carries the usage.

Failures are data (SPEC §3.8): an SDK error or a stream that stops before its `finish_reason`
ends the stream with a `ModelFailure`; tool arguments that are not a JSON object are a call the
loop answers with an error (`loop.replies.unparsed`). With the endpoint's `tool_calls_in_text`,
calls a model wrote in its text are recovered as calls (`_text_calls`).
Vendor SDK types never leave this module.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from openai import AsyncStream
from openai.types.chat import ChatCompletionChunk
from openai.types.completion_usage import CompletionUsage

from ..events import TextDelta, ThinkingDelta
from ..loop.replies import wire_text
from ..messages import AssistantMessage, ModelMessage, StopReason, ToolResultMessage, Usage
from ..model_settings import ModelSettings, resolve
from ..models import ModelFailure, ModelRequest, StreamItem
from . import _attachments, _settings
from ._errors import failure_from
from ._openai_common import CUT, OpenAIClientModel, ReplyParts, ToolCallBuffer, notes_text, relay
from ._text_calls import recover

STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAIChatModel(OpenAIClientModel):
    """A model behind a Chat Completions endpoint. Never raises for API failures."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one reply: deltas, then one `MessageCompleted` or one `ModelFailure`."""
        params = self.params(request)  # settings it cannot take raise here, before the request
        try:
            chunks = cast(
                "AsyncStream[ChatCompletionChunk]",
                await self.request(lambda c: c.chat.completions.create(**params)),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            yield failure_from(exc)
            return
        reader = _ChatReader()
        async for item in relay(chunks, reader.read, lambda: False):
            yield item
            if isinstance(item, ModelFailure):
                return
        if reader.finish is None:
            yield ModelFailure(error=CUT, retryable=True)
            return
        stop = STOP_REASONS.get(reader.finish, "end_turn")
        done = reader.parts.complete(stop, reader.usage, model=self.model, name=self.name)
        yield recover(done, request.tools) if self.endpoint.tool_calls_in_text else done

    def _fields(self, settings: ModelSettings, session: str | None) -> _settings.Fields:
        return _settings.openai_chat(
            settings, model=self.name, endpoint=self.endpoint.name, session=session
        )

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (as SDK keyword arguments; `extra_body` is merged over it)."""
        settings = resolve(request.settings, request.max_output_tokens)
        fields, extra = self._fields(settings, request.session_id)
        _attachments.check(self.name, request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        params.update(fields)
        output = request.output
        if output is not None:
            schema = {"name": output.name, "schema": output.schema, "strict": output.strict}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        if extra:
            params["extra_body"] = extra
        return params


def to_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Our conversation as Chat Completions messages (thinking is not sent back)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    results: list[ToolResultMessage] = []  # the batch's, whose images follow it
    for message in request.messages:
        if not isinstance(message, ToolResultMessage) and results:
            out.extend(filter(None, [_attachments.chat_tool_images(results)]))
            results = []
        out.append(_message(message))
        if isinstance(message, ToolResultMessage):
            results.append(message)
    out.extend(filter(None, [_attachments.chat_tool_images(results)]))
    notes = notes_text(request)
    if notes is not None:
        out.append({"role": "user", "content": notes})
    return out


def _message(message: ModelMessage) -> dict[str, Any]:
    if isinstance(message, AssistantMessage):
        calls = message.tool_calls
        # null content is only valid beside tool calls
        wire: dict[str, Any] = {
            "role": "assistant",
            "content": message.text or (None if calls else ""),
        }
        if calls:
            wire["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args)},
                }
                for c in calls
            ]
        return wire
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    return _attachments.chat_user(message)


class _ChatReader:
    """Turns chunks into our deltas and remembers what the final message needs."""

    def __init__(self) -> None:
        self.parts = ReplyParts()
        self.calls: dict[int, ToolCallBuffer] = {}
        self.finish: str | None = None
        self.usage: Usage | None = None

    def read(self, chunk: ChatCompletionChunk) -> Iterator[StreamItem]:
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        for choice in chunk.choices[:1]:
            delta = choice.delta
            extra = delta.model_extra or {}
            thinking = extra.get("reasoning_content") or extra.get("reasoning")
            if isinstance(thinking, str) and thinking:
                self.parts.thinking.append(thinking)
                yield ThinkingDelta(delta=thinking)
            for text in (delta.content, delta.refusal):
                if text:
                    self.parts.text.append(text)
                    yield TextDelta(delta=text)
            for fragment in delta.tool_calls or ():
                function = fragment.function
                buffer = self.calls.get(fragment.index)
                name = wire_text(function.name if function else None)
                if buffer is None:
                    buffer = ToolCallBuffer(
                        id=wire_text(fragment.id) or f"call_{fragment.index}", name=name
                    )
                    self.calls[fragment.index] = buffer
                    self.parts.calls.append(buffer)
                elif name and not buffer.name:  # a server that names the call late
                    buffer.name = name
                yield buffer.feed((function.arguments if function else None) or "")
            if choice.finish_reason is not None:
                self.finish = choice.finish_reason


def _usage(usage: CompletionUsage) -> Usage:
    details = usage.prompt_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=(details.cached_tokens or 0) if details else 0,
        cache_write_tokens=(details.cache_write_tokens or 0) if details else 0,
    )
