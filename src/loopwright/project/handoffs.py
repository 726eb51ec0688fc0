"""`handoffs:` in agent.yaml (docs/handoffs.md): the targets as `Handoff` values, and the
project's check that each names one of its agents (a `ConfigError` naming the file, the line
and the project's agents)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..agent import Agent
from ..errors import ConfigError
from ..handoffs import HISTORY_MODES, Handoff


def parse(values: list[Any], where: str) -> list[Handoff]:
    """`[billing, {agent: refunds, history: summary}]` as handoffs."""
    out: list[Handoff] = []
    for value in values:
        if isinstance(value, dict):
            extra = set(value) - {"agent", "history"}
            if extra or not isinstance(value.get("agent"), str):
                raise ConfigError(
                    "handoffs: each is a name or {agent: NAME, history: "
                    f"{' | '.join(HISTORY_MODES)}}}, not {value!r}",
                    source=where,
                )
            try:
                out.append(Handoff(value["agent"], history=value.get("history", "full")))
            except ConfigError as exc:
                raise ConfigError(str(exc), source=where) from None
        elif isinstance(value, str):
            out.append(Handoff(value))
        else:
            raise ConfigError(f"handoffs: {value!r} is not an agent's name", source=where)
    return out


def check(agents: Mapping[str, Agent], folders: Mapping[str, Path]) -> None:
    """Every handoff of the project's agents names one of them (or an Agent it knows); then
    they share one roster (`handoffs.join`), so that a name resolves from any of them."""
    for name, agent in agents.items():
        for handoff in agent.handoffs:
            assert isinstance(handoff, Handoff)
            if handoff.name in agents or handoff.name in agent._agents:
                continue
            file = folders[name] / "agent.yaml"
            if not file.exists():
                file = folders[name] / "agent.py"
            known = ", ".join(sorted(agents))
            raise ConfigError(
                f"handoffs: {handoff.name!r} is not an agent of the project (agents: {known})",
                source=f"{file}:{_line(file)}",
            )
    if any(agent.handoffs for agent in agents.values()):
        roster: dict[str, Agent] = {}
        for agent in agents.values():
            roster.update(agent._agents)
        roster.update(agents)
        for member in roster.values():
            object.__setattr__(member, "_agents", roster)


def _line(file: Path) -> int:
    if file.suffix != ".yaml":
        return 1
    node = yaml.compose(file.read_text())
    if isinstance(node, yaml.MappingNode):
        for key, _ in node.value:
            if getattr(key, "value", None) == "handoffs":
                return int(key.start_mark.line) + 1
    return 1
