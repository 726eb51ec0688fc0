"""Offline models for demos and tests: a scripted model and a function model.

Both stream like real providers (text, thinking and tool-argument deltas, then the complete
message with usage) and can inject failures. A script is YAML or JSON:

    replies:
      - text: "Let me look that up."       # optional
        thinking: "The user wants ..."     # optional
        tool_calls:                        # optional
          - {name: lookup_order, args: {order_id: A-1001}, id: call_1}   # id optional
        chunk: 8            # split text/thinking/args into deltas of 8 characters (default 16)
        delay: 0.01         # seconds before each delta (default 0)
        usage: {input_tokens: 120, output_tokens: 30}   # optional; estimated when absent
        stop_reason: max_tokens                          # optional override
      - fail: {error: "rate limited", retryable: true, retry_after: 0.05}
      - fail: {error: "stream cut", retryable: true, after_text: "partial"}  # cut mid-reply
      - stall: 30          # hang for 30 s (to test deadlines and cancellation)
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..events import MessageCompleted, TextDelta, ThinkingDelta, ToolDelta
from ..messages import AssistantMessage, Part, StopReason, Text, Thinking, ToolCall, Usage
from . import ModelFailure, ModelRequest, StreamItem

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted model reply (or failure)."""

    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    chunk: int = 16
    delay: float = 0.0
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    fail: ModelFailure | None = None
    fail_after_text: str = ""
    """With `fail`: text streamed before the failure (a stream cut mid-reply)."""
    stall: float = 0.0

    @classmethod
    def parse(cls, entry: Any, *, where: str = "reply") -> Reply:
        """Build a reply from one script entry (a mapping, or a bare string meaning text)."""
        if isinstance(entry, str):
            return cls(text=entry)
        if not isinstance(entry, Mapping):
            raise ConfigError(
                f"{where}: expected a mapping or a string, got {type(entry).__name__}"
            )
        known = {
            "text",
            "thinking",
            "tool_calls",
            "chunk",
            "delay",
            "usage",
            "stop_reason",
            "fail",
            "stall",
        }
        unknown = set(entry) - known
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
        calls = []
        for i, raw in enumerate(entry.get("tool_calls") or ()):
            if not isinstance(raw, Mapping) or "name" not in raw:
                raise ConfigError(f"{where}.tool_calls[{i}]: needs at least a 'name'")
            args = raw.get("args", {})
            if not isinstance(args, Mapping):
                raise ConfigError(f"{where}.tool_calls[{i}].args: expected a mapping")
            call_id = str(raw.get("id") or f"call_{next(_ids)}")
            calls.append(ToolCall(id=call_id, name=str(raw["name"]), args=dict(args)))
        fail = entry.get("fail")
        failure, after_text = None, ""
        if fail is not None:
            if isinstance(fail, str):
                fail = {"error": fail}
            failure = ModelFailure(
                error=str(fail.get("error", "scripted failure")),
                retryable=bool(fail.get("retryable", False)),
                retry_after=fail.get("retry_after"),
                prompt_too_long=bool(fail.get("prompt_too_long", False)),
            )
            after_text = str(fail.get("after_text", ""))
        usage = entry.get("usage")
        return cls(
            text=str(entry.get("text", "")),
            thinking=str(entry.get("thinking", "")),
            tool_calls=tuple(calls),
            chunk=max(1, int(entry.get("chunk", 16))),
            delay=float(entry.get("delay", 0.0)),
            usage=Usage(**usage) if isinstance(usage, Mapping) else None,
            stop_reason=entry.get("stop_reason"),
            fail=failure,
            fail_after_text=after_text,
            stall=float(entry.get("stall", 0.0)),
        )

    async def stream(self, request: ModelRequest, model: str) -> AsyncIterator[StreamItem]:
        """Stream this reply the way a provider would."""
        if self.stall:
            await asyncio.sleep(self.stall)
        streamed: tuple[tuple[type[TextDelta] | type[ThinkingDelta], str], ...] = (
            ((TextDelta, self.fail_after_text),)
            if self.fail is not None
            else ((ThinkingDelta, self.thinking), (TextDelta, self.text))
        )
        step, delay = self.chunk, self.delay
        for kind, text in streamed:
            for i in range(0, len(text), step):
                if delay:
                    await asyncio.sleep(delay)
                yield kind(delta=text[i : i + step])
        if self.fail is not None:
            yield self.fail
            return
        for call in self.tool_calls:
            encoded = json.dumps(call.args)
            for i in range(0, len(encoded), self.chunk):
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield ToolDelta(id=call.id, tool=call.name, delta=encoded[i : i + self.chunk])
        parts: list[Part] = []
        if self.thinking:
            parts.append(Thinking(text=self.thinking))
        if self.text:
            parts.append(Text(text=self.text))
        parts.extend(self.tool_calls)
        stop = self.stop_reason or ("tool_use" if self.tool_calls else "end_turn")
        usage = self.usage or Usage(
            input_tokens=sum(len(str(m)) for m in request.messages[-4:]) // 4 + 1,
            output_tokens=(len(self.text) + len(self.thinking)) // 4 + 1,
        )
        message = AssistantMessage(parts=tuple(parts), stop_reason=stop, usage=usage, model=model)
        yield MessageCompleted(message=message)


@dataclass(slots=True)
class ScriptedModel:
    """Replays scripted replies in order and records every request it receives.

    Running out of replies ends the stream with a (non-retryable) failure; `unused` tells how
    many replies were never requested, and `assert_exhausted()` complains about them.

    With `catch_up` (models made from a `scripted:<path>` string, new for every run), the first
    request skips as many successful replies as the conversation already holds assistant
    messages, so a session continued or resumed in another process goes on where it was.
    """

    replies: list[Reply]
    name: str = "scripted:inline"
    requests: list[ModelRequest] = field(default_factory=list)
    _next: int = 0
    catch_up: bool = False

    @classmethod
    def from_script(cls, data: Any, *, name: str = "scripted:inline") -> ScriptedModel:
        entries = data.get("replies") if isinstance(data, Mapping) else data
        if not isinstance(entries, list):
            raise ConfigError(f"{name}: a script is a list of replies (or {{replies: [...]}})")
        return cls(
            [Reply.parse(e, where=f"{name}: replies[{i}]") for i, e in enumerate(entries)],
            name=name,
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load a YAML or JSON script (`scripted:<path>` model strings use this)."""
        import yaml

        source = Path(path)
        try:
            data = yaml.load(
                source.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            )
        except OSError as exc:
            raise ConfigError(f"cannot read script: {exc.strerror}", source=str(source)) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"invalid script: {exc}", source=str(source)) from None
        model = cls.from_script(data, name=f"scripted:{source}")
        model.catch_up = True
        return model

    @property
    def unused(self) -> int:
        return len(self.replies) - self._next

    def assert_exhausted(self) -> None:
        if self.unused:
            raise AssertionError(f"{self.unused} scripted replies were never requested")

    def _skip_answered(self, request: ModelRequest) -> None:
        answered = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        while answered and self._next < len(self.replies):
            if self.replies[self._next].fail is None:
                answered -= 1
            self._next += 1

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if self.catch_up and not self.requests:
            self._skip_answered(request)
        self.requests.append(replace(request, messages=tuple(request.messages)))
        if self._next >= len(self.replies):
            return _fail(f"script exhausted: all {len(self.replies)} replies were used")
        reply = self.replies[self._next]
        self._next += 1
        return reply.stream(request, self.name)


ReplyFunction = Callable[[ModelRequest], "Reply | str | Awaitable[Reply | str]"]


@dataclass(slots=True)
class FunctionModel:
    """A model whose replies come from a Python function of the request.

    The function returns a `Reply` (or a plain string for a text reply), sync or async.
    """

    fn: ReplyFunction
    name: str = "function:inline"

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        reply = self.fn(request)
        if isinstance(reply, str):
            reply = Reply(text=reply)
        if isinstance(reply, Reply):
            return reply.stream(request, self.name)
        return self._later(reply, request)

    async def _later(
        self, pending: Awaitable[Reply | str], request: ModelRequest
    ) -> AsyncIterator[StreamItem]:
        reply = await pending
        if isinstance(reply, str):
            reply = Reply(text=reply)
        async for item in reply.stream(request, self.name):
            yield item


async def _fail(error: str) -> AsyncIterator[StreamItem]:
    yield ModelFailure(error=error)
