"""An agent is a value: persona, model, tools, rules and limits. It does nothing by itself;
`Session.run` (or `loopwright.run`) drives it through the loop. Change one with
`dataclasses.replace`."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import ConfigError
from .handoffs import Handoff, join, transfers
from .hooks import Hooks
from .loop.output import Output, OutputMode
from .model_settings import ModelSettings
from .sandbox import Sandbox
from .state.compaction import Compaction
from .tools import Tool
from .toolsets import Toolset, Toolsets

if TYPE_CHECKING:
    from .gate.permissions import Gate
    from .models import Model, ToolSpec

_log = logging.getLogger("loopwright.tools")


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
    tools: Sequence[Tool | Toolset] = ()
    """Tools and toolsets (`toolsets.Toolset`: an MCP server, the built-ins, subagents): a
    fixed toolset is flattened here; a live one is listed before each model request."""
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
    fallback_models: Sequence[str | Model] = ()
    """Models to switch to, in order, when a request fails past its retries (or with a failure
    no retry helps): the rest of the run asks the next one (`fallback`, `model:fallback`)."""
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
    output_type: Any = None
    """Structured output: the final answer must be a value of this type (a pydantic model, or
    any type pydantic's `TypeAdapter` takes); `RunResult.output` holds it (docs/output.md)."""
    output_schema: Mapping[str, Any] | None = field(default=None, hash=False)
    """Structured output as a JSON Schema (what `output_schema:` in agent.yaml gives): the
    answer is checked with jsonschema, and `RunResult.output` is the plain JSON value."""
    output_retries: int = 2
    """Times the model is asked again when its final answer does not fit; then `loop:error`."""
    output_mode: OutputMode = "auto"
    """`native`: the provider's structured output; `tool`: a `final_answer` tool; `auto`: native
    where the model has it (official endpoints, scripted models), else the tool."""
    continue_truncated: int = 0
    """Times a reply cut by the output limit (without tool calls) is continued: the model is
    asked to go on where it stopped and the pieces are joined (`message:truncated`)."""
    sandbox: Sandbox | None = None
    """Run the `shell` built-in and stdio MCP servers under bubblewrap, and root the file
    built-ins in the sandbox's workspace (docs/sandbox.md); bubblewrap is checked now."""
    handoffs: Sequence[str | Agent | Handoff] = ()
    """Agents this one may hand the conversation to (`transfer_to_<name>` tools, gated like
    any tool): Agent objects, names (resolved when the handoff happens) or `Handoff` values
    with what of the history the target sees (docs/handoffs.md)."""
    _handoffs: dict[str, Handoff] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _agents: dict[str, Agent] = field(default_factory=dict, init=False, repr=False, compare=False)
    _specs: tuple[ToolSpec, ...] = field(default=(), init=False, repr=False, compare=False)
    _spec_chars: int | None = field(default=None, init=False, repr=False, compare=False)
    _by_name: dict[str, Tool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _live: tuple[Toolset, ...] = field(default=(), init=False, repr=False, compare=False)
    _listed: dict[int, tuple[int, tuple[Tool, ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _gate: Gate = field(default=None, init=False, repr=False, compare=False)  # type: ignore[assignment]
    _output: Output | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"agent {self.name!r}: max_turns must be at least 1")
        given = tuple(self.tools)
        if self.sandbox is not None:
            from .sandbox.apply import sandboxed

            given = sandboxed(given, self.sandbox)
        handoffs, transfer_tools = transfers(self.name, self.handoffs)
        given = (*given, *transfer_tools)
        strays = [t for t in given if not isinstance(t, (Tool, Toolset))]
        if strays:
            raise ConfigError(f"agent {self.name!r}: {strays[0]!r} is neither a tool nor a toolset")
        fixed = _fixed(given)
        names = [t.name for t in fixed]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"agent {self.name!r}: duplicate tool names {duplicates}")
        live = tuple(t for t in given if isinstance(t, Toolset) and t.fixed is None)
        object.__setattr__(self, "tools", given[: len(given) - len(transfer_tools)])
        object.__setattr__(self, "handoffs", handoffs)
        object.__setattr__(self, "_handoffs", {h.tool_name: h for h in handoffs})
        join(self, handoffs)
        fallback = self.fallback_models
        fallback = (fallback,) if isinstance(fallback, str) else tuple(fallback)
        object.__setattr__(self, "fallback_models", fallback)
        object.__setattr__(self, "_live", live)
        object.__setattr__(self, "_by_name", {t.name: t for t in fixed})
        object.__setattr__(self, "_specs", tuple(t.spec for t in fixed))
        object.__setattr__(self, "_gate", _make_gate(self.rules))
        if self.output_retries < 0 or self.continue_truncated < 0:
            raise ConfigError(
                f"agent {self.name!r}: output_retries and continue_truncated cannot be negative"
            )
        try:
            object.__setattr__(self, "_output", Output.of(self.output_type, self.output_schema))
        except ConfigError as exc:
            raise ConfigError(f"agent {self.name!r}: {exc}") from None

    @property
    def output(self) -> Output | None:
        """The agent's structured output (`output_type` or `output_schema`), None without."""
        return self._output

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the tools now (the live toolsets as last listed)."""
        return self._specs

    @property
    def spec_chars(self) -> int:
        """The characters the tools' names, descriptions and schemas add to every request
        (counted once a listing: the budget's estimate before the provider reports)."""
        if self._spec_chars is None:
            chars = sum(
                len(s.name) + len(s.description) + len(json.dumps(s.parameters))
                for s in self._specs
            )
            object.__setattr__(self, "_spec_chars", chars)
            return chars
        return self._spec_chars

    @property
    def current_tools(self) -> tuple[Tool, ...]:
        """Every tool the agent offers now: its own, and its live toolsets' as last listed."""
        return tuple(self._by_name.values())

    def find_tool(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    async def refresh_tools(self, entered: Toolsets | None = None) -> None:
        """List the live toolsets again where they changed, entering them through `entered`
        (their owner: a runtime's, a session's) first when it has not; without it, they are
        entered already (a run's, by its session's owner as the run starts). The agent's tool table is
        updated in place, so every run of the agent sees the change; a live tool whose name an
        earlier tool already has is left out (and logged). A toolset that fails to enter or
        list keeps its last listing (none before the first), and is logged."""
        changed = False
        for toolset in self._live:
            listed = self._listed.get(id(toolset))
            try:
                if entered is not None:
                    await entered.enter(toolset)
                version = toolset.version
                if listed is None or listed[0] != version:
                    self._listed[id(toolset)] = (version, tuple(await toolset.list_tools()))
                    changed = True
            except Exception:  # its calls fail with the reason; the run goes on without it
                _log.exception("agent %r: toolset %r failed to list", self.name, toolset.name)
        if changed:
            self._rebuild()
            if len(self._listed) == len(self._live):  # every tool known: the rules name them
                from .gate.rule_tools import check_agent

                check_agent(self)

    def _rebuild(self) -> None:
        fixed = [*_fixed(self.tools), *(self._by_name[name] for name in self._handoffs)]
        table = {t.name: t for t in fixed}
        for toolset in self._live:
            for t in self._listed.get(id(toolset), (0, ()))[1]:
                if t.name in table:
                    _log.warning(
                        "agent %r: toolset %r repeats the tool name %r: left out",
                        self.name,
                        toolset.name,
                        t.name,
                    )
                    continue
                table[t.name] = t
        self._by_name.clear()
        self._by_name.update(table)
        object.__setattr__(self, "_specs", tuple(t.spec for t in table.values()))
        object.__setattr__(self, "_spec_chars", None)

    def gate(self) -> Gate:
        """The permission gate this agent's calls go through (a rules file is loaded when the
        agent is built, and re-read when it changes)."""
        return self._gate


def _fixed(given: Sequence[Tool | Toolset]) -> list[Tool]:
    """The tools and the fixed toolsets' tools, in order."""
    out: list[Tool] = []
    for item in given:
        if isinstance(item, Tool):
            out.append(item)
        elif item.fixed is not None:
            out.extend(item.fixed)
    return out


def _make_gate(rules: Gate | str | Path | None) -> Gate:
    from .gate.permissions import AllowAll, RulesFile

    if rules is None:
        return AllowAll()
    if isinstance(rules, (str, Path)):
        return RulesFile(rules)
    return rules
