"""An agent is a value: persona, model, tools, rules and limits. It does nothing by itself;
`Session.run` (or `loopwright.run`) drives it through the loop. Change one with
`dataclasses.replace`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .compaction import Compaction
from .errors import ConfigError
from .hooks import Hooks
from .model_settings import ModelSettings
from .tools import Tool

if TYPE_CHECKING:
    from .models import Model, ToolSpec
    from .permissions import Gate


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How model requests are retried on retryable failures (SPEC §3.8)."""

    attempts: int = 2
    """Retries after the first try."""
    backoff: float = 0.25
    """Linear backoff: the n-th retry waits n × backoff seconds (or what `retry-after` says)."""
    max_delay: float = 30.0
    deadline: float | None = 600.0
    """Seconds one request may take, first byte to last; past it, the request fails (and is
    retried within `attempts`). None: no bound but the endpoint's timeout on silence."""
    budget: int = 10
    """Retries one run may spend in all, across its requests: a flaky provider cannot turn a
    long run into an endless one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """Everything that defines an agent. Keyword-only; every field but `model` has a default."""

    model: str | Model
    """A `"provider:model"` string or a `Model` instance."""
    name: str = "agent"
    """Also the `agent` segment of the permission scope."""
    instructions: str = ""
    """The system prompt (the persona)."""
    description: str = ""
    """When this agent is a subagent: the tool description its parent's model reads."""
    tools: Sequence[Tool] = ()
    rules: Gate | str | Path | None = None
    """A gate, or the path of a rules YAML file (re-read when it changes). None allows every
    tool: an agent built in Python trusts the tools it was given."""
    max_turns: int = 25
    """Model requests allowed per run; then the run stops with `max_turns`."""
    on_deny: Literal["stop", "continue"] = "stop"
    """`stop`: a denial skips the batch's other calls and ends the run. `continue`: the model is
    told about the denial and the run goes on."""
    hooks: Hooks = field(default_factory=Hooks)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    context_budget: int | None = None
    """Tokens of context the agent may use (budget checks nudge at 70 %, flag at 92 %); None:
    the model's context window from the catalog, or 100,000 for unknown models."""
    compaction: Compaction | None = field(default_factory=Compaction)
    """When and how the history is compacted; None turns compaction off."""
    max_output_tokens: int | None = None
    """The older spelling of `settings.max_output_tokens` (which wins when both are set)."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """How the model is asked: sampling, stop sequences, the output limit, reasoning, request
    metadata, provider extras (`model_settings`); a run may lay its own over them."""
    tool_concurrency: int = 64
    """Calls of one batch that may run at once."""
    tool_timeout: float | None = 120.0
    """Default seconds before a tool call is cancelled (an inline one cannot be)."""
    tool_grace: float = 5.0
    """Seconds a run waits, before it ends, for the threads of calls it gave up on (cancelled
    or timed out while they ran), so that what they really did is logged (`tool:late_result`);
    a thread that finishes later is reported to the `loopwright.tools` logger only."""
    max_tool_output: int = 50_000
    """Default characters of tool output beyond which the result is an error."""
    steering: Literal["one", "all"] = "one"
    """Deliver queued steering messages one per step boundary, or all at once."""
    follow_up: Literal["one", "all"] = "one"
    _specs: tuple[ToolSpec, ...] = field(default=(), init=False, repr=False, compare=False)
    _by_name: dict[str, Tool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _gate: Gate = field(default=None, init=False, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"agent {self.name!r}: max_turns must be at least 1")
        tools = tuple(self.tools)
        names = [t.name for t in tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"agent {self.name!r}: duplicate tool names {duplicates}")
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "_specs", tuple(t.spec for t in tools))
        object.__setattr__(self, "_by_name", {t.name: t for t in tools})
        object.__setattr__(self, "_gate", _make_gate(self.rules))

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the tools (computed once)."""
        return self._specs

    def find_tool(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def gate(self) -> Gate:
        """The permission gate this agent's calls go through (a rules file is loaded when the
        agent is built, and re-read when it changes)."""
        return self._gate


def _make_gate(rules: Gate | str | Path | None) -> Gate:
    from .permissions import AllowAll, RulesFile

    if rules is None:
        return AllowAll()
    if isinstance(rules, (str, Path)):
        return RulesFile(rules)
    return rules
