"""The durable conversation: pure message values.

A history is a list of `UserMessage`, `AssistantMessage`, `ToolResultMessage` and the app's own
`CustomMessage` (never sent to the model as it is). Values carry no
identity (sequence numbers, session ids and timestamps belong to the store). Every tool call in an
assistant message is answered by exactly one `ToolResultMessage`, in call order, before the next
user or assistant message; the loop and recovery keep that invariant for every provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .attachments import Attachment as Attachment
from .attachments import estimated_chars
from .state._values import value

StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "error", "aborted"]
"""Why a model reply ended, normalised across providers."""


@value
class Text:
    """Plain text the model (or the user) wrote."""

    text: str
    type: Literal["text"] = "text"


@value
class Thinking:
    """Reasoning the model exposed; `signature` round-trips provider verification data."""

    text: str
    signature: str | None = None
    type: Literal["thinking"] = "thinking"


@value
class ToolCall:
    """One request by the model to call one tool."""

    id: str
    """Provider-assigned call id; tool results refer to it."""
    name: str
    """The tool's name as the model spelled it (it may not exist)."""
    args: dict[str, Any]
    """Arguments as parsed from the model's JSON; not yet validated."""
    type: Literal["tool_call"] = "tool_call"


Part: TypeAlias = Text | Thinking | ToolCall


@value
class Usage:
    """Token accounting for one model request."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None
    """Cost in US dollars when the model's prices are known."""


@value
class UserMessage:
    """Input from the person (or a steering/follow-up message, or a carry-over note)."""

    content: str
    attachments: tuple[Attachment, ...] | None = None  # images, documents (`attachments`)
    role: Literal["user"] = "user"


@value
class AssistantMessage:
    """One complete model reply."""

    parts: tuple[Part, ...] = ()
    stop_reason: StopReason = "end_turn"
    usage: Usage | None = None
    model: str | None = None
    """The `provider:model` string that produced the reply."""
    role: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        """All text parts joined (thinking excluded)."""
        texts = []  # (a loop: no generator or comprehension frame, read a few times a step)
        for p in self.parts:
            if isinstance(p, Text):
                texts.append(p.text)
        return "".join(texts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        calls = []
        for p in self.parts:
            if isinstance(p, ToolCall):
                calls.append(p)
        return calls


@value
class ToolResultMessage:
    """The answer to one tool call, as the model will read it."""

    call_id: str
    tool: str
    content: str
    is_error: bool = False
    attachments: tuple[Attachment, ...] | None = None  # images a tool returned
    details: Any = None  # (`ToolReturn.details`: for the doors; no provider sends it)
    role: Literal["tool"] = "tool"


@value
class CustomMessage:
    """An app's own entry in the history (a UI note, a marker): doors show it, the model never
    sees it unless the agent's `convert` hook turns it into a model message."""

    kind: str
    content: str = ""
    data: dict[str, Any] | None = None
    role: Literal["custom"] = "custom"


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | CustomMessage
ModelMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def message_chars(message: Message) -> int:
    """Rough size of a message for token estimates (about four characters a token), its
    attachments' estimate included."""
    if isinstance(message, AssistantMessage):
        n = 0
        for p in message.parts:
            n += len(p.text) if not isinstance(p, ToolCall) else 16 + len(p.name) + len(str(p.args))
        return n + 12
    if isinstance(message, CustomMessage):
        return 0  # (the model does not see it: a converted one counts once reported)
    extra = estimated_chars(message.attachments) if message.attachments else 0
    return len(message.content) + 12 + extra


@dataclass(slots=True)
class Recovery:
    """The batch of a run that died mid-way: what it had finished and what it had started."""

    calls: list[ToolCall]
    results: dict[str, ToolResultMessage]
    started: set[str]
    """Calls whose intent was committed (`tool:started`): they may have had effects."""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The arguments each started call started with (a human's edit, not the model's)."""
