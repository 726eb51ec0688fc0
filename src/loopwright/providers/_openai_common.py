"""What the two OpenAI dialects share: the SDK client (see `_client`), tool-call argument
buffers parsed incrementally, and the assembly of the finished reply."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jiter
import openai

from ..events import MessageCompleted, ToolDelta
from ..gate.arguments import not_json
from ..loop.replies import unparsed
from ..messages import AssistantMessage, Part, StopReason, Text, Thinking, ToolCall, Usage
from ..models import ModelRequest
from ..models.catalog import with_cost
from ..state.text import valid_data
from ._bounds import Tally
from ._client import ClientModel
from ._errors import failure_from

CUT = "the stream ended before the reply was complete"


class OpenAIClientModel(ClientModel[openai.AsyncOpenAI]):
    """The part of an OpenAI-dialect model that owns the SDK client."""

    def _build(self, **options: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(**options)


async def relay(
    stream: Any, read: Callable[[Any], Iterable[Any]], done: Callable[[], bool]
) -> AsyncIterator[Any]:
    """Feed the SDK stream's items to `read` and yield what it makes (its text made valid),
    until `done()` or the stream ends. An error while reading ends it with that failure
    (cancellation propagates); the stream is closed either way."""
    tally = Tally()
    try:
        iterator = aiter(stream)
        while not done():
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                yield failure_from(exc)
                return
            for made in read(item):
                if (too_much := tally.over(made)) is not None:  # (P10: `_bounds`)
                    yield too_much
                    return
                yield valid_data(
                    made
                )  # no lone surrogate reaches the run (`loopwright.state.text`)
    finally:
        await stream.close()


def notes_text(request: ModelRequest) -> str | None:
    """The request's transient notes as one user message, or None."""
    return "\n\n".join(request.notes) if request.notes else None


@dataclass(slots=True)
class ToolCallBuffer:
    """One tool call being streamed: its arguments arrive as JSON fragments."""

    id: str
    name: str
    arguments: str = ""

    def feed(self, fragment: str) -> ToolDelta:
        """Append a fragment; the delta carries the arguments parsed so far."""
        self.arguments += fragment
        return ToolDelta(id=self.id, tool=self.name, delta=fragment, partial_args=self.partial())

    def partial(self) -> dict[str, Any] | None:
        if not self.arguments:
            return None
        try:
            value = jiter.from_json(self.arguments.encode(), partial_mode="trailing-strings")
        except ValueError:
            return None
        return value if isinstance(value, dict) and not_json(value) is None else None

    def parse(self) -> ToolCall:
        """The finished call; arguments that are not a JSON object are kept `unparsed`: the
        loop answers the call with an error the model can act on, and no tool runs."""
        try:
            args = json.loads(self.arguments) if self.arguments.strip() else {}
        except ValueError as exc:
            args = unparsed(self.arguments, str(exc))
        if not isinstance(args, dict):
            args = unparsed(self.arguments, f"a JSON {type(args).__name__}, not an object")
        return ToolCall(id=self.id, name=self.name, args=args)


@dataclass(slots=True)
class ReplyParts:
    """What a stream has delivered so far, assembled into the final message at its end."""

    thinking: list[str] = field(default_factory=list)
    reasoning: list[Thinking] = field(default_factory=list)
    """Finished reasoning items (Responses), in order: when there are any, they are the reply's
    thinking (with what a later request needs to send them back), and `thinking` only streamed."""
    text: list[str] = field(default_factory=list)
    calls: list[ToolCallBuffer] = field(default_factory=list)

    def complete(
        self, stop: StopReason, usage: Usage | None, *, model: str, name: str
    ) -> MessageCompleted:
        parts: list[Part] = []
        if self.reasoning:
            parts.extend(self.reasoning)
        elif self.thinking:
            parts.append(Thinking(text="".join(self.thinking)))
        if self.text:
            parts.append(Text(text="".join(self.text)))
        parts.extend(buffer.parse() for buffer in self.calls)
        if usage is not None:
            usage = with_cost(model, usage)
        message = AssistantMessage(parts=tuple(parts), stop_reason=stop, usage=usage, model=name)
        return MessageCompleted(message=valid_data(message))
