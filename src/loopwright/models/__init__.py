"""The model seam: one protocol, a request in and a stream of our own events out.

A provider turns a `ModelRequest` into text, thinking and tool-argument deltas and ends with
exactly one `MessageCompleted` (the whole reply with its usage) or one `ModelFailure`. Providers
must not raise for API failures: a failure is the last item of the stream, and says whether a
retry may help. Models are chosen by a `"provider:model"` string through `get_model`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .._values import frozen
from ..errors import UnknownModel
from ..events import MessageCompleted, TextDelta, ThinkingDelta, ToolDelta
from ..messages import Message
from ..model_settings import ModelSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model is told about one tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """The shape the final answer must have (structured output, `loopwright.output`): a JSON
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
    messages: Sequence[Message]
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
    reply to it; for others the run offers a `final_answer` tool (`loopwright.output`)."""


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
_PROVIDERS: dict[str, ModelFactory] = {}  # the process's configuration, not a run's state


def register_provider(name: str, factory: ModelFactory) -> None:
    """Make `"name:<model>"` strings resolve through `factory(<model>)`."""
    if "scripted" not in _PROVIDERS and name != "scripted":
        _register_builtins()  # built-ins first, so a user's endpoint may replace a preset
    _PROVIDERS[name] = factory
    for spec in [s for s in _RESOLVED if s.partition(":")[0] == name]:
        del _RESOLVED[spec]


_RESOLVED: dict[str, Model] = {}  # one model (HTTP client) a spec per process: `get_model`


def get_model(spec: str | Model) -> Model:
    """Resolve a `"provider:model"` string (or pass a `Model` through). A provider's string
    resolves to one model per process, so its HTTP client and connections are shared by every
    run (scripted models start afresh each time)."""
    if not isinstance(spec, str):
        return spec
    resolved = _RESOLVED.get(spec)
    if resolved is not None:
        return resolved
    provider, sep, model = spec.partition(":")
    if "scripted" not in _PROVIDERS:
        _register_builtins()
    if provider not in _PROVIDERS:
        _register_plugins()
    factory = _PROVIDERS.get(provider)
    if not sep or factory is None:
        known = ", ".join(sorted(_PROVIDERS))
        raise UnknownModel(f"unknown model {spec!r}: use 'provider:model' with one of: {known}")
    resolved = factory(model)
    if provider != "scripted":  # a script's position is per model: every string starts afresh
        _RESOLVED[spec] = resolved
    return resolved


def _register_builtins() -> None:
    from ..providers import register_presets
    from .scripted import ScriptedModel

    register_provider("scripted", ScriptedModel.from_file)
    register_presets()


def _register_plugins() -> None:
    """Providers from installed packages: entry points in the `loopwright.providers` group,
    each naming a factory `(model: str) -> Model`, then those plugins registered (the
    `loopwright.plugins` group). A built-in or a configured endpoint of the same name wins."""
    from importlib.metadata import entry_points

    from ..plugins import providers

    for entry in entry_points(group="loopwright.providers"):
        _PROVIDERS.setdefault(entry.name, entry.load())
    for name, factory in providers().items():
        _PROVIDERS.setdefault(name, factory)
