"""The model seam: one protocol, a request in and a stream of our own events out.

A provider turns a `ModelRequest` into text, thinking and tool-argument deltas and ends with
exactly one `MessageCompleted` (the whole reply with its usage) or one `ModelFailure`. Providers
must not raise for API failures: a failure is the last item of the stream, and says whether a
retry may help. Models are chosen by a `"provider:model"` string through `registry.get_model`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..events import MessageCompleted, TextDelta, ThinkingDelta, ToolDelta
from ..messages import ModelMessage
from ..model_settings import ModelSettings
from ..state._values import frozen


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model is told about one tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """The shape the final answer must have (structured output, `loopwright.loop.output`): a JSON
    Schema whose root is an object (another value travels wrapped as `{"value": ...}`)."""

    name: str
    schema: dict[str, Any] = field(hash=False)
    strict: bool = False
    """The schema keeps the rules of strict decoding (OpenAI's `strict`): every object closed
    and every property required."""


@frozen  # made per request: without object.__setattr__ (_values)
class ModelRequest:
    """One request to a model. `messages` is the live history: read it, never mutate it."""

    system: str
    messages: Sequence[ModelMessage]
    tools: tuple[ToolSpec, ...] = ()
    notes: tuple[str, ...] = ()
    """Transient notes for this request only (a budget nudge, output carried into a retry);
    providers send them after the history, as user text."""
    max_output_tokens: int | None = None
    """The older spelling of `settings.max_output_tokens` (which wins when both are set)."""
    model: str | Model | None = None
    """Set by a `before_request` hook to send this one request to another model."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """The agent's model settings with the run's laid over them; a `before_request` hook may
    replace them (`dataclasses.replace(request, settings=...)`)."""
    session_id: str | None = None
    """The session the request is for (providers send a hash of it as request metadata)."""
    output: OutputFormat | None = None
    """The agent's structured output: a provider with native structured output constrains the
    reply to it; for others the run offers a `final_answer` tool (`loopwright.loop.output`)."""
    purpose: Literal["turn", "summary", "title"] = "turn"
    """What it is asked for: a run's turn, a compaction's summary (`state.compaction`) or a
    session's title (`runtime.titling`); a scripted model answers each from its own script."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFailure:
    """The last item of a failed stream."""

    error: str
    retryable: bool = False
    """Timeouts, rate limits, 5xx, cut or malformed streams: a retry may help."""
    retry_after: float | None = None
    """Seconds the server asked us to wait."""
    prompt_too_long: bool = False


StreamItem: TypeAlias = TextDelta | ThinkingDelta | ToolDelta | MessageCompleted | ModelFailure


@runtime_checkable
class Model(Protocol):
    """A language model behind a provider. Implementations must not raise for API failures."""

    @property
    def name(self) -> str:
        """The `provider:model` string."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one reply: deltas, then one `MessageCompleted` or one `ModelFailure`."""
        ...


ModelFactory: TypeAlias = Callable[[str], Model]
_PROVIDERS: dict[str, ModelFactory] = {}
"""Provider name → factory; the built-ins join it on the first `registry.get_model`."""
_RESOLVED: dict[str, Model] = {}
"""`provider:model` → the one model of the process that string resolved to (`get_model`)."""


def register_provider(name: str, factory: ModelFactory) -> None:
    """Make `"name:<model>"` strings resolve through `factory(<model>)` (`get_model`); a
    built-in of the same name (a preset) is replaced."""
    _PROVIDERS[name] = factory
    for spec in [s for s in _RESOLVED if s.partition(":")[0] == name]:
        del _RESOLVED[spec]
