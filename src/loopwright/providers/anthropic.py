"""The Anthropic Messages API, streaming, behind the one `Model` protocol.

What goes out (`POST /v1/messages`, `stream: true`):

- `system`: the request's system prompt as one text block marked `cache_control: ephemeral`, and
  the last tool definition marked the same way, so the long stable prefix is cached;
- `max_tokens`: the request's limit, else the catalog's output limit for the model, else 8192;
- the request's model settings as `_settings.anthropic` maps them (`thinking`, `stop_sequences`,
  `metadata`; `temperature`, `top_p` and `extra` as the SDK's extra body);
- `messages`: a user message is user text; an assistant message is its parts in order (thinking
  blocks only when they carry a signature, `redacted_thinking` blocks as they came, text,
  `tool_use`); a tool result is a user-role
  `tool_result` block. Consecutive user-role messages (several tool results, then a steering
  message) are merged into one, since the API requires alternating roles, and the request's
  transient notes are text blocks at the end of the last user message.

What comes back: `content_block_delta` events become `TextDelta`, `ThinkingDelta` and `ToolDelta`
(with the arguments parsed so far, by jiter's partial mode); `message_start` and `message_delta`
carry usage and the stop reason; `message_stop` completes the reply, which is yielded as one
`MessageCompleted` with its parts in block order and its cost from the catalog. A thinking block
keeps its signature, and a `redacted_thinking` block becomes a `Thinking` part without text whose
signature is its data (marked `REDACTED`), so extended thinking survives a tool loop.

Failures are data (the `Model` contract): an SDK exception, an `error` event inside the stream
(e.g. `overloaded_error`) and a stream that ends before `message_stop` end the stream with one
`ModelFailure`; only cancellation propagates. A `tool_use` block whose JSON does not parse is
a call the loop answers with an error (`loop.replies.unparsed`), not a failure.
SDK types never leave this module.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
import jiter

from ..events import MessageCompleted, TextDelta, ThinkingDelta, ToolDelta
from ..gate.arguments import not_json
from ..loop.replies import unparsed, wire_text
from ..messages import (
    AssistantMessage,
    ModelMessage,
    Part,
    StopReason,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..model_settings import ModelSettings, resolve
from ..models import ModelFailure, ModelRequest, StreamItem, ToolSpec, catalog
from ..state.text import valid_data
from . import _attachments, _settings
from ._bounds import Tally
from ._client import ClientModel
from ._errors import NOT_RETRIED, TOO_LONG, failure_from
from ._signatures import REDACTED, is_anthropic

DEFAULT_MAX_TOKENS = 8192
CACHED = {"type": "ephemeral"}
STOP_REASONS: dict[str, StopReason] = {s: s for s in ("end_turn", "tool_use", "max_tokens")}
"""Anything else (stop_sequence, refusal, pause_turn, …) ends the turn."""
PARSE_ALWAYS = 8192
"""Partial tool arguments are re-parsed on every delta up to this size, then each time they
grew by a quarter, so a 300 KB file write costs a few parses, not thousands."""


class AnthropicModel(ClientModel[anthropic.AsyncAnthropic]):
    """A Claude model (or any server speaking the Messages API) at an endpoint."""

    def _build(self, **options: Any) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(**options)  # base_url None: ANTHROPIC_BASE_URL

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one reply: deltas, then one `MessageCompleted` or one `ModelFailure`."""
        params = self.params(request)  # settings it cannot take raise here, before the request
        try:
            events = await self.request(lambda c: c.messages.create(**params))
        except Exception as exc:  # asyncio.CancelledError is a BaseException: it propagates
            yield failure_from(exc)
            return
        reply, tally = _Reply(), Tally()
        async with events:
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    yield _stream_failure(exc)
                    return
                for item in reply.feed(event.model_dump(warnings=False)):
                    if (too_much := tally.over(item)) is not None:  # (P10: `_bounds`)
                        yield too_much
                        return
                    yield valid_data(item)  # no lone surrogate reaches the run
                    if isinstance(item, ModelFailure):
                        return
        yield valid_data(reply.finish(self.name, self.model))

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body as SDK keyword arguments (`extra_body` is merged over it)."""
        settings = resolve(request.settings, request.max_output_tokens)
        fields, extra = self._fields(settings, request.session_id)
        _attachments.check(self.name, request.messages)
        # plain dicts in the wire shape; the SDK's TypedDicts would add nothing but casts
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_messages(request.messages, request.notes),
            "stream": True,
            **fields,
        }
        if request.system:
            params["system"] = [{"type": "text", "text": request.system, "cache_control": CACHED}]
        if request.tools:
            params["tools"] = to_tools(request.tools)
        if request.output is not None:  # the SDK's transform keeps to what the API takes
            schema = anthropic.transform_schema(request.output.schema)
            params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        if extra:
            params["extra_body"] = extra
        return params

    def _fields(self, settings: ModelSettings, session: str | None) -> _settings.Fields:
        info = catalog.lookup(self.model)
        limit = info.max_output if info is not None else DEFAULT_MAX_TOKENS
        return _settings.anthropic(settings, model=self.name, limit=limit, session=session)


# -- our values → the wire ------------------------------------------------------------------------


def to_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool definitions; the last one carries the cache breakpoint for system + tools."""
    out: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
    if out:
        out[-1]["cache_control"] = CACHED
    return out


def to_messages(history: Sequence[ModelMessage], notes: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The history as Messages API turns: user-role runs merged, notes appended to the last."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in history:
        if isinstance(message, UserMessage):
            add("user", _text_blocks([message.content]))
            add("user", _attachments.anthropic_blocks(message.attachments or ()))
        elif isinstance(message, ToolResultMessage):
            result = {"type": "tool_result", "tool_use_id": message.call_id}
            content: str | list[dict[str, Any]] = message.content
            if message.attachments:  # a tool's images go inside its result, after its text
                images = _attachments.anthropic_blocks(message.attachments)
                content = _text_blocks([message.content]) + images
            add("user", [{**result, "content": content, "is_error": message.is_error}])
        else:
            add("assistant", _assistant_blocks(message))
    add("user", _text_blocks(notes))
    return out


def _text_blocks(texts: Sequence[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t} for t in texts if t]  # the API rejects empty text


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, Thinking):
            if not is_anthropic(part.signature):  # unsigned or another provider's: not sent
                continue
            if part.signature.startswith(REDACTED):
                blocks.append(
                    {"type": "redacted_thinking", "data": part.signature[len(REDACTED) :]}
                )
            else:
                blocks.append(
                    {"type": "thinking", "thinking": part.text, "signature": part.signature}
                )
        elif isinstance(part, Text):
            blocks.extend(_text_blocks([part.text]))
        else:
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.args}
            )
    return blocks


# -- the wire → our values ------------------------------------------------------------------------


def _stream_failure(exc: Exception) -> ModelFailure:
    """A failure while iterating. The SDK raises an `error` event inside a 200 response as a
    status error carrying the 200; those (overloaded, api_error) are worth another try, not one
    that says the request or the account is wrong (`NOT_RETRIED`)."""
    status = getattr(exc, "status_code", None)
    if status is None or status >= 400:
        return failure_from(exc)
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    kind, text = "error", str(exc)
    if isinstance(error, dict):
        kind, text = str(error.get("type", kind)), str(error.get("message", text))
    if TOO_LONG.search(text):
        return ModelFailure(error=f"prompt too long: {text}", prompt_too_long=True)
    retryable = kind not in NOT_RETRIED  # (overloaded, api_error, rate limits: another try)
    return ModelFailure(error=f"{kind} in the stream: {text}", retryable=retryable)


def _partial_args(buffer: str) -> dict[str, Any] | None:
    """The arguments parsed so far from incomplete JSON (None until there is an object)."""
    try:
        value = jiter.from_json(buffer.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None
    return value if isinstance(value, dict) and not_json(value) is None else None


@dataclass(slots=True)
class _Block:
    kind: str
    """text | thinking | tool_use | anything the runtime does not use (dropped)."""
    text: str = ""
    signature: str | None = None
    id: str = ""
    name: str = ""
    start_input: dict[str, Any] = field(default_factory=dict)
    partial: dict[str, Any] | None = None
    parsed_at: int = 0
    """Length of the JSON when `partial` was parsed."""
    args: dict[str, Any] | None = None
    """A finished tool_use block's parsed input."""


@dataclass(slots=True)
class _Reply:
    """The reply as it accumulates from the stream's events (plain dicts)."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    stop: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    complete: bool = False

    def feed(self, event: dict[str, Any]) -> list[StreamItem]:
        kind = event.get("type")
        if kind == "message_start":
            self._usage((event.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            return self._start(event["index"], event.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(self.blocks.get(event["index"]), event.get("delta") or {})
        elif kind == "content_block_stop":
            block = self.blocks.get(event["index"])
            if block is not None:
                _finish_tool(block)
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.complete = True
        return []

    def _start(self, index: int, start: dict[str, Any]) -> list[StreamItem]:
        kind = str(start.get("type"))
        block = _Block(kind=kind)
        self.blocks[index] = block
        if kind == "tool_use":
            block.id, block.name = wire_text(start.get("id")), wire_text(start.get("name"))
            block.start_input = dict(start.get("input") or {})
            return []
        if kind == "redacted_thinking":
            block.kind, block.signature = "thinking", REDACTED + str(start.get("data") or "")
            return []
        if kind == "thinking":
            block.signature = start.get("signature") or None
            return self._delta(block, {"type": "thinking_delta", "thinking": start.get("thinking")})
        if kind == "text":
            return self._delta(block, {"type": "text_delta", "text": start.get("text")})
        return []

    def _delta(self, block: _Block | None, delta: dict[str, Any]) -> list[StreamItem]:
        if block is None:
            return []
        kind = delta.get("type")
        if kind == "signature_delta":
            block.signature = (block.signature or "") + str(delta.get("signature") or "")
            return []
        if kind == "text_delta" and block.kind == "text" and delta.get("text"):
            block.text += delta["text"]
            return [TextDelta(delta=delta["text"])]
        if kind == "thinking_delta" and block.kind == "thinking" and delta.get("thinking"):
            block.text += delta["thinking"]
            return [ThinkingDelta(delta=delta["thinking"])]
        if kind == "input_json_delta" and block.kind == "tool_use" and delta.get("partial_json"):
            piece = str(delta["partial_json"])
            block.text += piece
            if len(block.text) <= PARSE_ALWAYS or len(block.text) >= 1.25 * block.parsed_at:
                block.partial, block.parsed_at = _partial_args(block.text), len(block.text)
            return [
                ToolDelta(id=block.id, tool=block.name, delta=piece, partial_args=block.partial)
            ]
        return []  # citations and the deltas of blocks we drop

    def _usage(self, usage: dict[str, Any] | None) -> None:
        for key, value in (usage or {}).items():
            if isinstance(value, int) and key.endswith("_tokens"):
                self.usage[key] = value  # message_delta's counts are cumulative

    def finish(self, name: str, model: str) -> MessageCompleted | ModelFailure:
        if not self.complete:
            return ModelFailure(
                error="the stream ended before the reply was complete", retryable=True
            )
        parts: list[Part] = []
        for _, block in sorted(self.blocks.items()):
            if block.kind == "thinking" and (block.text or block.signature):
                parts.append(Thinking(text=block.text, signature=block.signature))
            elif block.kind == "text" and block.text:
                parts.append(Text(text=block.text))
            elif block.kind == "tool_use":
                _finish_tool(block)
                parts.append(
                    ToolCall(
                        id=block.id,
                        name=block.name,
                        args=block.args if block.args is not None else {},
                    )
                )
        calls = any(isinstance(p, ToolCall) for p in parts)
        default: StopReason = "tool_use" if calls and self.stop is None else "end_turn"
        stop = STOP_REASONS.get(self.stop or "", default)  # no stop reason: judge by the calls
        message = AssistantMessage(
            parts=tuple(parts), stop_reason=stop, usage=self._total(model), model=name
        )
        return MessageCompleted(message=message)

    def _total(self, model: str) -> Usage:
        u = self.usage
        read, write = u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0)
        usage = Usage(
            input_tokens=u.get("input_tokens", 0) + read + write,
            output_tokens=u.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
        return catalog.with_cost(model, usage)


def _finish_tool(block: _Block) -> None:
    """Parse a tool_use block's input once it is complete. Garbage never reaches a tool: input
    that is not a JSON object is kept `unparsed`, and the loop answers the call with an error
    the model can act on (`loop.replies`)."""
    if block.kind != "tool_use" or block.args is not None:
        return
    if not block.text.strip():
        block.args = block.start_input
        return
    try:
        value = json.loads(block.text)
    except ValueError as exc:
        value, problem = None, str(exc)
    else:
        problem = f"a JSON {type(value).__name__}, not an object"
    block.args = value if isinstance(value, dict) else unparsed(block.text, problem)
