"""`agent.yaml`: its fields (`_Spec`), and how an agent folder's agent.yaml becomes an `Agent`
(`from_yaml`): its model and fallbacks checked now, its tools (the folder's tools.py, the
`tools:` import paths, `builtins:`, `plugins:`), prompt.md and rules.yaml beside it, its
skills. Every error is a `ConfigError` naming the file and the line of the key at fault."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ..agent import Agent, RetryPolicy
from ..errors import ConfigError
from ..loop.output import Output
from ..model_settings import ModelSettings
from ..state.compaction import Compaction
from ..tools import Tool
from ..toolsets import Toolset
from .handoffs import parse as parse_handoffs
from .python_files import import_file

PROMPT_FILE = "prompt.md"
"""The instructions in a file of their own beside agent.yaml (instead of `instructions:`)."""
NAME_RULE = "lowercase words joined by hyphens, like 'support' or 'order-desk'"


Builtin = Literal["ask_user", "files", "files-readonly", "shell", "read_result"]
BUILTINS: tuple[str, ...] = get_args(Builtin)
"""What `builtins:` may name."""


class _Spec(BaseModel):
    """The fields of agent.yaml."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    description: str = ""
    instructions: str = ""
    model: str | None = None
    fallback: list[str] = []
    """Models to fall back to, in order, when the model fails past its retries."""
    tools: list[str] = []
    """Extra tools by import path, `package.module:name`."""
    builtins: list[Builtin] = []
    plugins: list[str] = []
    """Installed plugins whose tools and toolsets this agent gets (docs/plugins.md)."""
    max_turns: int = 25
    on_deny: Literal["stop", "continue"] = "stop"
    context_budget: int | None = None
    max_output_tokens: int | None = None
    settings: dict[str, Any] = {}
    """Model settings: temperature, top_p, stop, max_output_tokens, reasoning, metadata, extra."""
    tool_timeout: float | None = 120.0
    compaction: dict[str, Any] | None = {}
    retry: dict[str, Any] = {}
    output_schema: dict[str, Any] | None = None
    """Structured output: the final answer must be JSON fitting this schema (docs/output.md)."""
    output_retries: int = 2
    output_mode: Literal["auto", "native", "tool"] = "auto"
    continue_truncated: int = 0
    sandbox: dict[str, Any] | None = None
    """Run the shell and stdio MCP servers under bubblewrap (docs/sandbox.md)."""
    a2a: list[Any] = []
    """Remote A2A agents, each a tool `a2a__<name>` (docs/a2a.md)."""
    handoffs: list[Any] = []
    """Agents of the project this one may hand the conversation to (docs/handoffs.md)."""


def from_yaml(folder: Path, defaults: dict[str, Any]) -> Agent:
    path = folder / "agent.yaml"
    text = path.read_text()
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ConfigError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}", source=f"{path}{line}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError("agent.yaml must be a mapping", source=f"{path}:1")
    try:
        spec = _Spec.model_validate({**_picked(defaults), **data})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        raise ConfigError(
            f"{'.'.join(map(str, error['loc'])) or 'agent'}: {error['msg']}",
            source=f"{path}:{_line_of(node, key)}",
        ) from None
    name = spec.name or folder.name
    if not _valid_name(name):
        raise ConfigError(
            f"invalid agent name {name!r}: {NAME_RULE}", source=f"{path}:{_line_of(node, 'name')}"
        )
    if spec.model is None:
        raise ConfigError(
            "no model: set `model:` here or [defaults] model in loopwright.toml", source=f"{path}:1"
        )
    model = _model(spec.model, folder, f"{path}:{_line_of(node, 'model')}")
    fallback = [_model(m, folder, f"{path}:{_line_of(node, 'fallback')}") for m in spec.fallback]
    sandbox = defaults.get("sandbox")
    if spec.sandbox is not None:
        from ..sandbox import Sandbox

        try:
            sandbox = Sandbox.parse(spec.sandbox, base=folder)
        except (ConfigError, TypeError) as exc:
            raise ConfigError(str(exc), source=f"{path}:{_line_of(node, 'sandbox')}") from None
    workspace = folder / "workspace" if sandbox is None else Path(sandbox.base())
    where = f"{path}:{_line_of(node, 'tools')}"
    tools: list[Tool | Toolset] = [*_tools(folder, spec, where, workspace)]
    if spec.plugins:
        from ..plugins import plugin_tools

        try:
            tools += plugin_tools(*spec.plugins)
        except ConfigError as exc:
            raise ConfigError(str(exc), source=f"{path}:{_line_of(node, 'plugins')}") from None
    if spec.a2a:
        from ..a2a_remote import a2a_tools

        try:
            tools += a2a_tools(spec.a2a)
        except (ConfigError, TypeError) as exc:
            raise ConfigError(str(exc), source=f"{path}:{_line_of(node, 'a2a')}") from None
    instructions = spec.instructions
    prompt = folder / PROMPT_FILE
    if prompt.is_file():
        if "instructions" in data:
            raise ConfigError(
                f"instructions here and in {PROMPT_FILE} beside it: keep one",
                source=f"{path}:{_line_of(node, 'instructions')}",
            )
        instructions = prompt.read_text()
    rules = folder / "rules.yaml"
    if spec.output_schema is not None:
        Output.of(None, spec.output_schema, source=f"{path}:{_line_of(node, 'output_schema')}")
    agent = Agent(
        name=name,
        description=spec.description,
        instructions=instructions,
        model=model,
        fallback_models=fallback,
        tools=tools,
        rules=rules if rules.exists() else None,
        max_turns=spec.max_turns,
        on_deny=spec.on_deny,
        context_budget=spec.context_budget,
        max_output_tokens=spec.max_output_tokens,
        settings=_model_settings(spec.settings, f"{path}:{_line_of(node, 'settings')}"),
        tool_timeout=spec.tool_timeout,
        compaction=_compaction(spec.compaction, folder, path, node),
        retry=_build(RetryPolicy, spec.retry, path),
        output_schema=spec.output_schema,
        output_retries=spec.output_retries,
        output_mode=spec.output_mode,
        continue_truncated=spec.continue_truncated,
        sandbox=sandbox,
        handoffs=parse_handoffs(spec.handoffs, f"{path}:{_line_of(node, 'handoffs')}"),
    )
    skills = folder / "skills"
    if skills.is_dir():
        from ..skills import discover

        agent, _left_out = discover(skills).apply(agent)
    return agent


def _model(spec: str, folder: Path, where: str) -> str:
    """Check the provider now (keys are checked when a run starts); scripted paths are
    relative to the agent folder."""
    from ..models.registry import providers_known

    provider, sep, rest = spec.partition(":")
    known = providers_known(provider)
    if not sep or provider not in known:
        raise ConfigError(
            f"unknown model {spec!r}: use 'provider:model' with one of: {', '.join(known)}",
            source=where,
        )
    if provider == "scripted" and not Path(rest).is_absolute():
        return f"scripted:{folder / rest}"
    return spec


def _tools(folder: Path, spec: _Spec, where: str, workspace: Path) -> list[Tool]:
    tools: list[Tool] = []
    if (folder / "tools.py").exists():
        module = import_file(folder / "tools.py", f"tools_{folder.name}")
        tools += [v for v in vars(module).values() if isinstance(v, Tool)]
    for path in spec.tools:
        module_name, _, attr = path.partition(":")
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot import tool {path!r}: {exc}", source=where) from None
        if not isinstance(value, Tool):
            raise ConfigError(f"{path!r} is not a tool (decorate it with @tool)", source=where)
        tools.append(value)
    if "ask_user" in spec.builtins:
        from ..tools import ask_user

        tools.append(ask_user)
    if "files" in spec.builtins or "files-readonly" in spec.builtins:
        from ..builtins.files import workspace_tools

        tools += workspace_tools(workspace, writable="files" in spec.builtins)
    if "shell" in spec.builtins:
        from ..builtins.shell import shell_tool

        tools.append(shell_tool(workspace))
    if "read_result" in spec.builtins:  # large results read back by range (docs/large-results.md)
        from ..builtins.results import read_result

        tools.append(read_result)
    return tools


def _build(cls: Any, values: dict[str, Any], path: Path) -> Any:
    try:
        return cls(**values)
    except TypeError as exc:
        raise ConfigError(f"{cls.__name__}: {exc}", source=str(path)) from None


def _compaction(
    values: dict[str, Any] | None, folder: Path, path: Path, node: Any
) -> Compaction | None:
    """`compaction:` as a `Compaction`: `keep_tools` a list of tool names, and the summary's
    prompt inline (`prompt:`) or in a file of the agent folder (`prompt_file:`, read now)."""
    if values is None:
        return None
    values, where = dict(values), _value_of(node, "compaction")
    if "keep_tools" in values:
        keep = values["keep_tools"]
        if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
            line = _line_of(where, "keep_tools")
            raise ConfigError(
                "compaction.keep_tools: a list of tool names", source=f"{path}:{line}"
            )
        values["keep_tools"] = tuple(keep)
    if (name := values.pop("prompt_file", None)) is not None:
        source = f"{path}:{_line_of(where, 'prompt_file')}"
        if "prompt" in values:
            raise ConfigError("compaction: prompt and prompt_file: keep one", source=source)
        file = folder / str(name)
        if not file.is_file():
            raise ConfigError(f"compaction.prompt_file: no file {file}", source=source)
        values["prompt"] = file.read_text()
    return _build(Compaction, values, path)  # type: ignore[no-any-return]


def _value_of(node: Any, key: str) -> Any:
    """The value node of `key` in a YAML mapping node (None when absent)."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return v
    return None


def _model_settings(values: dict[str, Any], where: str) -> ModelSettings:
    try:
        return ModelSettings.parse(values)
    except ConfigError as exc:
        raise ConfigError(f"settings: {exc}", source=where) from None


def _picked(defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in defaults.items() if k in ("model", "max_turns", "on_deny", "plugins")}


def _line_of(node: Any, key: str) -> int:
    """1-based line of `key` in a YAML mapping node (1 when unknown)."""
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if getattr(k, "value", None) == key:
                return int(k.start_mark.line) + 1
    return 1


def _valid_name(name: str) -> bool:
    return re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) is not None
