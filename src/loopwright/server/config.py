"""An agent's resolved configuration as the API shows it (`GET /agents/{name}/config`): the
same facts as `loopwright agents --show NAME --json` (the rules from `project.rules_of`), in the
loopengine v1 field names. Never a secret: model strings name a provider, not a key."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..errors import ConfigError
from ..loop import fallback
from ..loop.budget import DEFAULT_BUDGET, context_budget
from ..model_settings import ModelSettings, as_data, check, resolve
from ..models.catalog import lookup
from ..models.registry import get_model
from ..project import rules_of
from ..skills import Skills

SKILL_INDEX_BUDGET: int = inspect.signature(Skills.apply).parameters["budget_tokens"].default
"""The skill index's budget in tokens, as a project's agents are given it."""


def context_budget_of(agent: Agent) -> int:
    """The context budget a run of `agent` uses (`budget.context_budget`): its own, else its
    model's context window from the catalog, else 100,000."""
    if not isinstance(agent.model, str):
        return context_budget(agent, agent.model)
    if agent.context_budget is not None:
        return agent.context_budget
    info = lookup(agent.model.partition(":")[2] or agent.model)
    return (info.context_window if info else None) or DEFAULT_BUDGET


def model_string(agent: Agent, root: Path) -> str:
    """The `provider:model` string (a scripted model's path relative to the project), or
    `custom` for a model object built in Python."""
    model = agent.model
    if not isinstance(model, str):
        return "custom"
    provider, _, rest = model.partition(":")
    if provider == "scripted":
        try:
            return f"scripted:{Path(rest).resolve().relative_to(root.resolve()).as_posix()}"
        except ValueError:
            return model
    return model


def summary(agent: Agent, root: Path) -> dict[str, Any]:
    return {
        "name": agent.name,
        "systemPrompt": agent.instructions,
        "description": agent.description,
        "model": model_string(agent, root),
    }


def configuration(agent: Agent, folder: Path, root: Path) -> dict[str, Any]:
    """The resolved configuration: prompt, model, limits, tools with their schemas, rules,
    skills and subagents; `configError` says why the rules file's current version is not in
    force (the last good rules are), null while it is."""
    rules = rules_of(agent)
    source = rules["file"]
    if source is not None:
        try:
            source = Path(source).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            source = Path(source).name
    skills: list[dict[str, str]] = []
    if agent.find_tool("Skill") is not None and (folder / "skills").is_dir():
        from ..skills import discover

        skills = [
            {"name": s.name, "description": s.description} for s in discover(folder / "skills")
        ]
    return {
        **summary(agent, root),
        "maxTurns": agent.max_turns,
        "onDeny": agent.on_deny,
        "contextBudgetTokens": context_budget_of(agent),
        "settings": as_data(agent.settings),
        "fallbackModels": [m if isinstance(m, str) else m.name for m in agent.fallback_models],
        "skillIndexBudgetTokens": SKILL_INDEX_BUDGET,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.parameters,
                "gated": t.gated,
                "subagent": t.subagent is not None,
            }
            for t in agent.current_tools
        ],
        "permissions": {
            "source": source,
            "defaultDecision": rules["default_decision"],
            "rules": [
                {
                    "name": r["name"],
                    "tool": r["tool"],
                    "decision": r["decision"],
                    "tenant": r["tenant"],
                    "environment": r["environment"],
                    "agent": r["agent"],
                    "when": r["when"],
                }
                for r in rules["rules"]
            ],
        },
        "skills": skills,
        "subagents": [t.name for t in agent.current_tools if t.subagent is not None],
        "configError": rules.get("error"),
    }


def run_settings(agent: Agent, data: Any) -> ModelSettings | None:
    """A message's `settings` (agent.yaml's keys) for its run, checked against the agent's
    model and fallback models as `Session.run` checks them: `ValueError` with the
    `ConfigError`'s text when invalid or refused (a 400), None when not given. A model that
    cannot be made (a missing API key) is the server's error, raised as it is."""
    if data is None:
        return None
    try:
        own = ModelSettings.parse(data)
    except ConfigError as exc:
        raise ValueError(f"settings: {exc}") from None
    models = [get_model(agent.model), *fallback.models(agent)]
    merged = resolve(own.over(agent.settings), agent.max_output_tokens)
    try:
        for model in models:
            check(model, merged)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return own
