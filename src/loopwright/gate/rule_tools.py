"""A rule must name a tool its agent has: a `deny` rule whose tool is misspelt never matches, and
the call it was meant to stop falls through to the default decision. So a rule naming a tool
the agent does not have, or a glob (`db_*`) that matches none of its tools, is a `ConfigError`
naming the rule, the file and the agent's tools. A pure wildcard (`*`) is never one.

The agent's tools are its own, its plugins', its subagents' (a rule scoped to a subagent
names the subagent's tools) and its MCP servers' once they are listed: an agent with live
toolsets is checked when they have all been listed (`Agent.refresh_tools`, at the first run or
session open), an agent without any as it is built (`project.load_agent`). A rule naming an
MCP server's tool (`mcp__SERVER__...`) of a server the agent does not list itself is not
checked: the server may come with a session (an editor's, over ACP).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .permissions import Rules, RulesFile
from .rule_values import _glob


def check_agent(agent: Any) -> None:
    """`ConfigError` for the first rule of the agent's rules that names no tool it has (an
    `Agent`: not imported, which imports this module)."""
    gate = agent.gate()
    rules = gate.rules if isinstance(gate, RulesFile) else gate
    if isinstance(rules, Rules):
        check(rules, agent.name, tool_names(agent))


def tool_names(agent: Any) -> list[str]:
    """The names of every tool `agent` and its subagents have now."""
    names: list[str] = []
    for tool in agent.current_tools:
        names.append(tool.name)
        if tool.subagent is not None:
            names += tool_names(tool.subagent)
    return names


def check(rules: Rules, agent: str, tools: Iterable[str]) -> None:
    """`ConfigError` (at the rules' file) for the first rule whose tool matches none of `tools`."""
    known = sorted(set(tools))
    for rule in rules.rules:
        if set(rule.tool) == {"*"} or any(_glob(rule.tool, name) for name in known):
            continue
        if _served_elsewhere(rule.tool, known):
            continue
        close = difflib.get_close_matches(rule.tool, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        what = "tools matching" if any(c in rule.tool for c in "*?[") else "the tool"
        raise ConfigError(
            f"rule {rule.name!r} names {what} {rule.tool!r}, which agent {agent!r} does not "
            f"have{hint}; its tools: {', '.join(known) or 'none'}",
            source=_where(rules.source, rule.name),
        )


PREFIX = "mcp__"
"""What an MCP server's tool names start with (`mcp.naming.PREFIX`)."""


def _served_elsewhere(tool: str, known: list[str]) -> bool:
    """Whether `tool` names a tool of an MCP server none of `known` comes from."""
    if not tool.startswith(PREFIX):
        return False
    server = f"{PREFIX}{tool[len(PREFIX) :].split('__', 1)[0]}__"
    return not any(name.startswith(server) for name in known)


def _where(source: str | None, name: str) -> str | None:
    """`FILE:LINE` of the rule called `name` (its `name:` line), else the file."""
    if source is None:
        return None
    try:
        lines = Path(source).read_text(errors="replace").splitlines()
    except OSError:
        return source
    pattern = re.compile(rf"^[\s-]*name:\s*['\"]?{re.escape(name)}['\"]?\s*(#.*)?$")
    line = next((n for n, text in enumerate(lines, 1) if pattern.match(text)), None)
    return f"{source}:{line}" if line else source
