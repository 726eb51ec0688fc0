"""`loopwright agents`: the project's agents, and (`--show NAME`) one agent's resolved
configuration — instructions, model, limits, tools with their schemas, rules, skills and
subagents (SPEC §9)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    CliError,
    add_json_option,
    add_place_options,
    is_agent_folder,
    load_agent_folder,
    model_name,
    opt,
    place_of,
    print_json,
    shown,
    table,
)

if TYPE_CHECKING:
    from ..agent import Agent


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agents = commands.add_parser(
        "agents",
        help="list the project's agents, or show one's resolved configuration",
        description="List the agents of the project (name, model, description). With --show "
        "NAME: the agent's resolved configuration: instructions, model, limits, tools with "
        "their JSON schemas, rules, skills and subagents.",
    )
    agents.add_argument("--show", metavar="NAME", help="show this agent's configuration")
    add_place_options(agents, tenant=False)
    add_json_option(agents, "the list or the configuration")
    agents.set_defaults(handler=agents_command)


def agents_command(args: argparse.Namespace) -> int:
    place = place_of(args)
    place.require_project()
    if place.bare:
        agent = load_agent_folder(place.root)
        found = {agent.name: (agent, place.root)}
    else:
        project = place.project()
        found = {n: (a, project.folders[n]) for n, a in sorted(project.agents.items())}
    if opt(args, "show"):
        name = args.show
        if name not in found:
            place.agent(name)  # raises the unknown-agent error, listing the agents
        agent, folder = found[name]
        config = describe(agent, folder)
        if opt(args, "json"):
            print_json(config)
        else:
            print(render(config))
        return 0
    if opt(args, "json"):
        for agent, folder in found.values():
            print_json(
                {
                    "name": agent.name,
                    "model": model_name(agent),
                    "description": agent.description,
                    "folder": str(folder),
                }
            )
        return 0
    if not found:
        raise CliError(
            f"no agents in {shown(place.root)}",
            hint="`loopwright new NAME` creates one (`loopwright init` creates a project)",
        )
    rows = [[a.name, model_name(a), a.description] for a, _ in found.values()]
    print(table(["NAME", "MODEL", "DESCRIPTION"], rows))
    return 0


def describe(agent: Agent, folder: Path) -> dict[str, Any]:
    """The agent's resolved configuration as plain data."""
    from ..model_settings import as_data
    from ..project import rules_of

    tools = [
        {"name": t.name, "description": t.description, "parameters": t.parameters}
        for t in agent.current_tools
    ]
    skills: list[str] = []
    if agent.find_tool("Skill") is not None and (folder / "skills").is_dir():
        from ..skills import discover

        skills = [s.name for s in discover(folder / "skills")]
    subagents = sorted(
        p.name for p in (folder / "subagents").glob("*") if p.is_dir() and is_agent_folder(p)
    )
    compaction = agent.compaction
    return {
        "name": agent.name,
        "folder": str(folder),
        "description": agent.description,
        "model": model_name(agent),
        "fallback": [m if isinstance(m, str) else m.name for m in agent.fallback_models],
        "settings": as_data(agent.settings),
        "instructions": agent.instructions,
        "limits": {
            "max_turns": agent.max_turns,
            "on_deny": agent.on_deny,
            "context_budget": agent.context_budget,
            "max_output_tokens": agent.max_output_tokens,
            "tool_timeout": agent.tool_timeout,
            "max_tool_output": agent.max_tool_output,
            "compaction": None if compaction is None else repr(compaction),
        },
        "tools": tools,
        "rules": rules_of(agent),
        "skills": skills,
        "subagents": subagents,
    }


def render(config: dict[str, Any]) -> str:
    out = [f"agent {config['name']}  ({shown(config['folder'])})"]
    if config["description"]:
        out.append(f"description: {config['description']}")
    out.append(f"model: {config['model']}")
    if config["fallback"]:
        out.append(f"fallback: {', '.join(config['fallback'])}")
    settings = " · ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in config["settings"].items()
    )
    out.append(f"settings: {settings or 'none (the provider defaults)'}")
    limits = config["limits"]
    shown_limits = " · ".join(
        f"{k}={'-' if v is None else v}" for k, v in limits.items() if k != "compaction"
    )
    out += [f"limits: {shown_limits}", f"compaction: {limits['compaction'] or 'off'}"]
    out.append("instructions:")
    out += [f"  {line}" for line in (config["instructions"] or "(none)").splitlines()]
    out.append(f"tools ({len(config['tools'])}):" if config["tools"] else "tools: none")
    for t in config["tools"]:
        out.append(
            f"  {t['name']} — {t['description'].splitlines()[0] if t['description'] else ''}"
        )
        schema = json.dumps(t["parameters"], indent=2, ensure_ascii=False)
        out += [f"      {line}" for line in schema.splitlines()]
    rules = config["rules"]
    if rules["file"] is None and not rules["rules"]:
        out.append(f"rules: none ({rules.get('note', '')}: every tool call is allowed)")
    else:
        where = shown(rules["file"]) if rules["file"] else "(in code)"
        out.append(f"rules: {where} · default decision: {rules['default_decision']}")
        for r in rules["rules"]:
            named = [f"{k} {r[k]}" for k in ("tenant", "environment", "agent") if r[k] != "*"]
            scope = f" [{', '.join(named)}]" if named else ""
            when = f" when {r['when']}" if r["when"] else ""
            out.append(f"  {r['name']}: {r['tool']} → {r['decision']}{when}{scope}")
    if rules.get("error"):
        out.append(f"rules error: {rules['error']}")
    out.append("skills: " + (", ".join(config["skills"]) or "none"))
    out.append("subagents: " + (", ".join(config["subagents"]) or "none"))
    return "\n".join(out)
