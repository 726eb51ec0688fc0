"""How a model is asked, as one portable value: sampling, stop sequences, the output limit,
reasoning, request metadata and provider-specific extras.

Settings live on the agent (`Agent(settings=...)`, `settings:` in agent.yaml), may be laid over
per run (`session.run(..., settings=...)`) and reach the provider on every `ModelRequest`, where a
`before_request` hook may replace them. Each dialect maps them to its own wire fields
(`providers/_settings.py`); a setting a provider cannot take is a `ConfigError` naming the
provider and the setting, raised when the run starts (and, for a hook's change, before that
request is sent). `None` everywhere means "not set: the provider's default".

    ModelSettings(temperature=0.2, reasoning="high", stop=["</answer>"])
    ModelSettings(reasoning=ReasoningBudget(budget_tokens=8000), extra={"service_tier": "flex"})
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeAlias, get_args

from .errors import ConfigError

ReasoningLevel: TypeAlias = Literal["off", "low", "medium", "high"]
LEVELS: tuple[str, ...] = get_args(ReasoningLevel)


@dataclass(frozen=True, slots=True)
class ReasoningBudget:
    """Reasoning with an explicit token budget (`{budget_tokens: N}` in YAML). Only dialects
    that take a budget accept it (Anthropic's extended thinking)."""

    budget_tokens: int

    def __post_init__(self) -> None:
        if type(self.budget_tokens) is not int or self.budget_tokens < 1:
            raise ConfigError(
                f"reasoning.budget_tokens must be a positive integer, not {self.budget_tokens!r}"
            )


Reasoning: TypeAlias = ReasoningLevel | ReasoningBudget


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """What a request asks of the model beyond the conversation. Every field is optional."""

    temperature: float | None = None
    """Sampling temperature, 0 to 2."""
    top_p: float | None = None
    """Nucleus sampling, 0 to 1."""
    stop: Sequence[str] | None = None
    """Sequences that end the reply (a single string is one sequence)."""
    max_output_tokens: int | None = None
    """Tokens the reply may take, reasoning included; None: the catalog's output limit (for
    Anthropic, which requires one) or the provider's default. Wins over `Agent.max_output_tokens`,
    the older spelling."""
    reasoning: Reasoning | None = None
    """`off`, `low`, `medium` or `high`, or `ReasoningBudget(N)`; mapped per dialect (see
    docs/models.md). None: the model's default."""
    metadata: bool | None = None
    """Send a hash of the session id as request metadata where the dialect takes it (OpenAI's
    `prompt_cache_key`, Anthropic's `metadata.user_id`), so a session's requests share a cache
    and a provider can tell users apart. None means yes; False sends nothing."""
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)  # (a dict: not hashed)
    """Provider-specific body fields, sent as they are and over anything mapped from the fields
    above (the SDKs' `extra_body`)."""

    def __post_init__(self) -> None:
        for name, high in (("temperature", 2.0), ("top_p", 1.0)):
            number = getattr(self, name)
            if number is not None and (
                not isinstance(number, int | float)
                or isinstance(number, bool)
                or not 0 <= number <= high
            ):
                raise ConfigError(f"{name} must be a number from 0 to {high:g}, not {number!r}")
        limit = self.max_output_tokens
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ConfigError(f"max_output_tokens must be a positive integer, not {limit!r}")
        if self.stop is not None:
            stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
            if not all(isinstance(s, str) and s for s in stop):
                raise ConfigError(f"stop must be non-empty strings, not {self.stop!r}")
            object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "reasoning", _reasoning(self.reasoning))
        if self.metadata is not None and not isinstance(self.metadata, bool):
            raise ConfigError(f"metadata must be true or false, not {self.metadata!r}")
        if not isinstance(self.extra, Mapping) or not all(isinstance(k, str) for k in self.extra):
            raise ConfigError(f"extra must be a mapping of field names, not {self.extra!r}")
        object.__setattr__(self, "extra", dict(self.extra))

    @classmethod
    def parse(cls, data: ModelSettings | Mapping[str, Any] | None) -> ModelSettings:
        """Settings from a mapping (agent.yaml's `settings:`, a run's options)."""
        if data is None:
            return _NONE  # (frozen: one value serves every run that sets nothing)
        if isinstance(data, ModelSettings):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"settings must be a mapping, not {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"unknown settings {unknown} (known: {', '.join(KNOWN)})")
        return cls(**data)

    def over(self, base: ModelSettings | Mapping[str, Any]) -> ModelSettings:
        """These settings laid over `base`: each field set here wins, `extra` merges by key.
        (`base` may be a mapping: an `Agent(settings={...})` works as well.)"""
        base = ModelSettings.parse(base)
        if self is _NONE or self == _NONE:  # nothing set over it (most runs): every request asks
            return base
        changes = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "extra" and getattr(self, f.name) is not None
        }
        return replace(base, **changes, extra={**base.extra, **self.extra})

    @property
    def sends_metadata(self) -> bool:
        return self.metadata is not False


KNOWN = tuple(f.name for f in fields(ModelSettings))


def _reasoning(value: Any) -> Reasoning | None:
    if value is None or isinstance(value, ReasoningBudget):
        return value
    if isinstance(value, str) and value in LEVELS:
        return value  # type: ignore[return-value]  # (checked against the Literal's values)
    if isinstance(value, Mapping) and set(value) == {"budget_tokens"}:
        return ReasoningBudget(value["budget_tokens"])
    raise ConfigError(
        f"reasoning must be one of {', '.join(LEVELS)} or {{budget_tokens: N}}, not {value!r}"
    )


def resolve(settings: ModelSettings, max_output_tokens: int | None) -> ModelSettings:
    """The settings a provider honours: `max_output_tokens` (the request's or the agent's older
    field) fills the limit when the settings leave it unset."""
    if settings.max_output_tokens is None and max_output_tokens is not None:
        return replace(settings, max_output_tokens=max_output_tokens)
    return settings


def session_key(session_id: str) -> str:
    """The opaque id sent for a session: a hash, since ids may be names or e-mail addresses,
    which must not leave the process as metadata."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


def check(model: Any, settings: ModelSettings) -> None:
    """Raise `ConfigError` if `model` cannot take `settings` (a model without a
    `check_settings` method — the scripted one, a plugin's — takes anything)."""
    checker = getattr(model, "check_settings", None)
    if callable(checker):
        checker(settings)


_NONE = ModelSettings()


def as_data(settings: ModelSettings) -> dict[str, Any]:
    """The settings that are set, as agent.yaml writes them (what `ModelSettings.parse` reads
    back): for `agents --show`, `GET /agents/{name}/config`."""
    data: dict[str, Any] = {}
    for name in KNOWN:
        value = getattr(settings, name)
        if isinstance(value, ReasoningBudget):
            value = {"budget_tokens": value.budget_tokens}
        elif isinstance(value, tuple):
            value = list(value)
        if value is not None and value != {}:
            data[name] = value
    return data
