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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ConfigError
from ..events import MessageCompleted, TextDelta, ThinkingDelta, ToolDelta
from ..messages import (
    AssistantMessage,
    Message,
    Part,
    StopReason,
    Text,
    Thinking,
    ToolCall,
    Usage,
    UserMessage,
)
from ..state._values import frozen, maker
from ..state.compaction import SUMMARY_HEADER, is_summary
from . import ModelFailure, ModelRequest, StreamItem


@frozen  # made per request by function models: without object.__setattr__ (_values)
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

    @property
    def parts(self) -> tuple[Part, ...]:
        """The parts of the message this reply completes."""
        thinking = (Thinking(text=self.thinking),) if self.thinking else ()
        text = (text_part(text=self.text),) if self.text else ()
        return (*thinking, *text, *self.tool_calls)

    @property
    def key(self) -> tuple[Any, ...]:
        return _key(self.parts)

    @classmethod
    def parse(cls, entry: Any, *, where: str = "reply", ids: Iterator[int] | None = None) -> Reply:
        """Build a reply from one script entry (a mapping, or a bare string meaning text); a
        call without an id gets `call_<n>`, n from `ids` (a script's own count: the same ids
        whenever the script is loaded)."""
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
            call_id = str(raw.get("id") or f"call_{next(ids or itertools.count(i + 1))}")
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
            ((text_delta, self.fail_after_text),)
            if self.fail is not None
            else ((thinking_delta, self.thinking), (text_delta, self.text))
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
            encoded = _json(call.args)
            for i in range(0, len(encoded), self.chunk):
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield tool_delta(id=call.id, tool=call.name, delta=encoded[i : i + self.chunk])
        stop = self.stop_reason or ("tool_use" if self.tool_calls else "end_turn")
        usage = self.usage or Usage(
            input_tokens=sum(len(str(m)) for m in request.messages[-4:]) // 4 + 1,
            output_tokens=(len(self.text) + len(self.thinking)) // 4 + 1,
        )
        message = assistant(parts=self.parts, stop_reason=stop, usage=usage, model=model)
        yield completed(message=message)


# (what a reply streams is made by the values' makers: see `_values.maker`)
text_delta, thinking_delta = maker(TextDelta), maker(ThinkingDelta)
tool_delta, text_part = maker(ToolDelta), maker(Text)
_json = json.JSONEncoder().encode  # (what `json.dumps` calls with no options, without its frame)
assistant, completed = maker(AssistantMessage), maker(MessageCompleted)


@dataclass(slots=True, eq=False)
class _Conversation:
    """One conversation's place in the script: the entry its next request gets."""

    next: int = 0


@dataclass(slots=True)
class ScriptedModel:
    """Replays scripted replies in order, once per conversation, and records every request.

    Each conversation has its own place in the script, so one model serves any number of
    sessions (a server, a playground) and each of them hears the script from the top. A request
    goes on with the conversation whose messages it holds (the very message objects the model
    was sent or answered before, which survives compaction's cuts); a compaction's summary
    request goes on with the conversation it summarises (the one served last). A request that
    holds none of them starts a conversation: at the top of the script, or, when it already
    holds assistant replies (a session continued in another process, or reloaded from a store),
    just after as many successful replies as it holds, so it goes on where it was.

    Running out of replies ends the stream with a (non-retryable) failure; `unused` tells how
    many replies no conversation reached, and `assert_exhausted()` complains about them.
    """

    native_output: ClassVar[bool] = True
    """A script's text is the answer as it stands (structured output needs no tool here)."""
    replies: list[Reply]
    name: str = "scripted:inline"
    context_window: int | None = None
    """The window the context budget takes (None: the default budget; an offline model has no
    catalog entry to look up)."""
    requests: list[ModelRequest] = field(default_factory=list)
    _reached: int = 0
    _seen: dict[int, tuple[Message, _Conversation]] = field(default_factory=dict)
    """Every message a conversation was sent or answered, by identity (held, so ids stay
    unique), with its conversation."""
    _last: _Conversation | None = None
    _summarised: _Conversation | None = None

    @classmethod
    def from_script(cls, data: Any, *, name: str = "scripted:inline") -> ScriptedModel:
        entries = data.get("replies") if isinstance(data, Mapping) else data
        if not isinstance(entries, list):
            raise ConfigError(f"{name}: a script is a list of replies (or {{replies: [...]}})")
        ids = itertools.count(1)
        return cls(
            [Reply.parse(e, where=f"{name}: replies[{i}]", ids=ids) for i, e in enumerate(entries)],
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
        return cls.from_script(data, name=f"scripted:{source}")

    @property
    def unused(self) -> int:
        return len(self.replies) - self._reached

    def assert_exhausted(self) -> None:
        if self.unused:
            raise AssertionError(f"{self.unused} scripted replies were never requested")

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        conversation = self._conversation(request)
        self.requests.append(replace(request, messages=tuple(request.messages)))
        if conversation.next >= len(self.replies):
            return _fail(f"script exhausted: all {len(self.replies)} replies were used")
        reply = self.replies[conversation.next]
        conversation.next += 1
        self._reached = max(self._reached, conversation.next)
        return self._answer(reply, request, conversation)

    def _conversation(self, request: ModelRequest) -> _Conversation:
        """The conversation `request` belongs to; its new messages are noted as its own."""
        messages = request.messages
        found, new = None, 0
        for message in reversed(messages):  # the newest messages are the unknown ones
            seen = self._seen.get(id(message))
            if seen is not None and seen[0] is message:
                found = seen[1]
                break
            new += 1
        if is_summary(request) and self._last is not None:
            found = self._summarised = self._last
        elif found is None:
            head = messages[0] if messages else None
            if isinstance(head, UserMessage) and head.content.startswith(SUMMARY_HEADER):
                found, self._summarised = self._summarised, None  # compacted to a new tail
        if found is None:
            found = _Conversation(next=self._after(messages))
        for message in messages[len(messages) - new :]:
            self._seen[id(message)] = (message, found)
        self._last = found
        return found

    def _after(self, messages: Sequence[Message]) -> int:
        """Where a conversation the model never saw goes on: after the reply that wrote its
        latest scripted answer (by content; the one nearest its count of answers when several
        read alike), or at the top when it holds none of the script's replies (a new session,
        or a script that holds only what is still to come)."""
        answered = sum(1 for m in messages if isinstance(m, AssistantMessage))
        for message in reversed(messages):
            if not isinstance(message, AssistantMessage):
                continue
            key = _key(message.parts)
            written = [i for i, r in enumerate(self.replies) if r.fail is None and r.key == key]
            if written:
                ok = [i for i, r in enumerate(self.replies) if r.fail is None]
                expected = ok[min(answered, len(ok)) - 1]
                return min(written, key=lambda i: (abs(i - expected), i)) + 1
            answered -= 1
        return 0

    async def _answer(
        self, reply: Reply, request: ModelRequest, conversation: _Conversation
    ) -> AsyncIterator[StreamItem]:
        async for item in reply.stream(request, self.name):
            if isinstance(item, MessageCompleted):  # the answer joins its conversation
                self._seen[id(item.message)] = (item.message, conversation)
            yield item


ReplyFunction = Callable[[ModelRequest], "Reply | str | Awaitable[Reply | str]"]


@dataclass(slots=True)
class FunctionModel:
    """A model whose replies come from a Python function of the request.

    The function returns a `Reply` (or a plain string for a text reply), sync or async.
    """

    native_output: ClassVar[bool] = True
    fn: ReplyFunction
    name: str = "function:inline"
    context_window: int | None = None
    """The window the context budget takes (None: the default budget; an offline model has no
    catalog entry to look up)."""

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


def _key(parts: Sequence[Part]) -> tuple[Any, ...]:
    """What a reply said: its texts and its calls' names and arguments, never their ids (a
    script read again numbers its calls afresh)."""
    said: list[Any] = []
    for part in parts:
        if isinstance(part, ToolCall):
            said.append(("call", part.name, json.dumps(part.args, sort_keys=True)))
        else:
            said.append((part.type, part.text))
    return tuple(said)


async def _fail(error: str) -> AsyncIterator[StreamItem]:
    yield ModelFailure(error=error)
