"""Agents on disk (SPEC §9): a project folder with `loopwright.toml`, `.env` and `agents/`.

    loopwright.toml            # [store] path/url, [defaults] model/max_turns, [providers.NAME] ...
    .env                       # loaded into the environment (never overriding what is set)
    agents/<name>/
        agent.yaml | agent.py  # declarative, or Python exporting `agent`
        prompt.md              # the instructions (agent.yaml agents; or `instructions:`)
        tools.py               # every Tool in it is the agent's (found automatically)
        rules.yaml             # permission rules, re-read when they change (agent.py agents
                               # too; an agent.py that also sets `rules=` is an error)
        mcp.json               # MCP servers whose tools it has (one at the root: every agent's)
        skills/<skill>/SKILL.md

Discovery errors (a duplicate name, a broken tools module, an unknown model provider, an invalid
rules file or agent.yaml) raise one `ConfigError` naming the file and line.

This module loads the project and each agent folder; `agent_yaml` reads an agent.yaml, and
`python_files` imports the project's agent.py and tools.py files.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..errors import ConfigError
from ..gate.permissions import AllowAll, Condition, Rules, RulesFile
from ..gate.rule_tools import check_agent
from .agent_yaml import NAME_RULE as NAME_RULE
from .agent_yaml import from_yaml
from .handoffs import check as check_handoffs
from .python_files import import_file


@dataclass(slots=True)
class Project:
    """A loaded project: its settings and its agents by name."""

    root: Path
    settings: dict[str, Any] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    folders: dict[str, Path] = field(default_factory=dict)

    def agent(self, name: str) -> Agent:
        if name not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ConfigError(f"unknown agent {name!r} (agents: {known})")
        return self.agents[name]

    def store_path(self) -> Path:
        configured = (self.settings.get("store") or {}).get("path")
        if os.environ.get("LOOPWRIGHT_HOME"):
            return Path(os.environ["LOOPWRIGHT_HOME"]) / "loopwright.db"
        return self.root / (configured or ".loopwright/loopwright.db")

    def store_url(self) -> str | Path:
        """Where the event log is: `$LOOPWRIGHT_STORE_URL`, else `[store] url` (e.g. a
        `postgresql://` URL), else the SQLite file of `store_path`."""
        store = self.settings.get("store") or {}
        url = os.environ.get("LOOPWRIGHT_STORE_URL") or store.get("url")
        if not isinstance(url, str | None):
            toml = str(self.root / "loopwright.toml")
            raise ConfigError("[store] url must be a string", source=toml)
        return url or self.store_path()

    def store_pool_size(self) -> int | None:
        """The most connections a PostgreSQL event log opens: `$LOOPWRIGHT_STORE_POOL_SIZE`,
        else `[store] pool_size`, else None (the log's default). A `ConfigError` unless it is
        a positive integer."""
        from ..store.log import pool_size_of

        text = os.environ.get("LOOPWRIGHT_STORE_POOL_SIZE", "").strip()
        if text:
            value = int(text) if text.isascii() and text.isdigit() else text
            return pool_size_of(value, "$LOOPWRIGHT_STORE_POOL_SIZE")
        store = self.settings.get("store") or {}
        if store.get("pool_size") is None:
            return None
        toml = str(self.root / "loopwright.toml")
        return pool_size_of(store["pool_size"], "[store] pool_size", source=toml)


def load_project(root: str | Path = ".", *, dotenv: bool = True) -> Project:
    """Load `loopwright.toml`, `.env` and every agent under `agents/`."""
    project = Project(root=Path(root).resolve())
    toml = project.root / "loopwright.toml"
    if toml.exists():
        text = toml.read_text()
        try:
            project.settings = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"invalid TOML: {exc}", source=str(toml)) from None
        from .config import check  # every table and key, typed (unknown ones named)

        check(project.settings, text, str(toml))
        if "providers" in project.settings:
            from ..providers import load_endpoints

            load_endpoints(toml)
    if dotenv and (project.root / ".env").exists():
        from dotenv import load_dotenv

        load_dotenv(project.root / ".env", override=False)
    from ..telemetry import from_project  # [telemetry] or LOOPWRIGHT_OTEL (docs/telemetry.md)

    from_project(project.settings.get("telemetry"), source=str(toml))
    agents_dir = project.root / "agents"
    defaults = dict(project.settings.get("defaults") or {})
    if "sandbox" in project.settings:  # the agents' default sandbox (docs/sandbox.md)
        from ..sandbox import Sandbox

        sandbox = Sandbox.parse(project.settings["sandbox"], base=project.root)
        defaults["sandbox"] = sandbox
    shared = _mcp_servers(project.root)  # the root's mcp.json: every agent's, one process each
    if agents_dir.is_dir():
        for folder in sorted(p for p in agents_dir.iterdir() if p.is_dir()):
            if (folder / "agent.yaml").exists() or (folder / "agent.py").exists():
                agent = load_agent(folder, defaults=defaults)
                if shared:
                    from ..mcp import with_servers

                    agent = with_servers(agent, shared)
                if not agent._live:  # (with MCP servers: once they are listed, `refresh_tools`)
                    check_agent(agent)  # a rule naming a tool the agent lacks is an error
                if agent.name in project.agents:
                    raise ConfigError(
                        f"duplicate agent name {agent.name!r} (also in "
                        f"{project.folders[agent.name]})",
                        source=str(folder),
                    )
                project.agents[agent.name] = agent
                project.folders[agent.name] = folder
    check_handoffs(project.agents, project.folders)  # each names an agent of the project
    return project


def load_agent(folder: str | Path, *, defaults: dict[str, Any] | None = None) -> Agent:
    """One agent folder: `agent.py` (exports `agent`) or `agent.yaml`, plus tools.py,
    rules.yaml and skills/ found by convention."""
    folder = Path(folder).resolve()
    if (folder / "agent.py").exists():
        module = import_file(folder / "agent.py", f"agent_{folder.name}")
        agent = getattr(module, "agent", None)
        if not isinstance(agent, Agent):
            raise ConfigError(
                "agent.py must export `agent = Agent(...)`", source=str(folder / "agent.py")
            )
        agent = _rules_beside(agent, folder)
    else:
        agent = from_yaml(folder, defaults or {})
    agent = _with_mcp(agent, folder)
    from ..plugins import with_plugins  # every plugin's hooks, before the agent's own

    return with_plugins(_with_subagents(agent, folder, defaults or {}))


def _mcp_servers(folder: Path) -> list[Any]:
    """The MCP servers of `folder/mcp.json` (docs/mcp.md), without importing MCP otherwise."""
    if not (folder / "mcp.json").is_file():
        return []
    from ..mcp import servers_in

    return list(servers_in(folder))


def _with_mcp(agent: Agent, folder: Path) -> Agent:
    """The servers of the agent folder's own mcp.json join its tools."""
    servers = _mcp_servers(folder)
    if not servers:
        return agent
    from ..mcp import with_servers

    return with_servers(agent, servers)


def _rules_beside(agent: Agent, folder: Path, file: str = "agent.py") -> Agent:
    """The `rules.yaml` of an agent.py agent's folder (or of any Python file's, which the CLI
    runs) applies to it, as to an agent.yaml one. An agent file that sets `rules=` to anything
    else as well is an error: one of the two would be silently ignored."""
    beside = folder / "rules.yaml"
    if not beside.exists():
        return agent
    if agent.rules is None:
        return replace(agent, rules=beside)
    own = agent.rules.path if isinstance(agent.rules, RulesFile) else agent.rules
    if isinstance(own, str | Path) and _same_file(own, beside):
        return agent
    source = folder / file
    lines = source.read_text(errors="replace").splitlines()
    line = next((n for n, text in enumerate(lines, 1) if re.search(r"\brules\s*=", text)), 0)
    raise ConfigError(
        f"agent {agent.name!r} sets `rules=` and {beside} is beside it: one of the two would be "
        "ignored; keep one (delete rules.yaml, or drop `rules=` so that rules.yaml applies)",
        source=f"{source}:{line}" if line else str(source),
    )


def _same_file(a: str | Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _with_subagents(agent: Agent, folder: Path, defaults: dict[str, Any]) -> Agent:
    """Each `subagents/<child>/` folder (the same layout, recursively) becomes a tool."""
    children = folder / "subagents"
    if not children.is_dir():
        return agent
    from ..subagents import subagent_tool

    tools = list(agent.tools)
    for child_folder in sorted(p for p in children.iterdir() if p.is_dir()):
        if (child_folder / "agent.yaml").exists() or (child_folder / "agent.py").exists():
            child = load_agent(child_folder, defaults=defaults)
            try:
                tools.append(subagent_tool(child))
            except ConfigError as exc:
                raise ConfigError(str(exc), source=str(child_folder)) from None
    return replace(agent, tools=tools)


def with_model(agent: Agent, model: str) -> Agent:
    """The agent on another model (`--model`)."""
    return replace(agent, model=model)


def rules_of(agent: Agent) -> dict[str, Any]:
    """The agent's rules as plain data (`loopwright agents --show`, `GET /agents/NAME/config`).
    A rules file is re-read first when it changed: `error` says why its current version is not
    in force (the last good rules are), until it loads again."""
    gate = agent.gate()
    if isinstance(gate, AllowAll):
        return {"file": None, "default_decision": "allow", "rules": [], "note": "no rules file"}
    path: str | None
    error = None
    if isinstance(gate, RulesFile):
        failed = gate.refresh()  # (before reading the rules: a new version may load now)
        rules, path = gate.rules, gate.path
        if failed is not None:
            error = f"{failed} (the last good rules stay in force)"
    elif isinstance(gate, Rules):
        rules, path = gate, gate.source
    else:
        return {"file": None, "default_decision": None, "rules": [], "note": type(gate).__name__}
    return {
        "file": path,
        "default_decision": rules.default_decision,
        "rules": [
            {
                "name": r.name,
                "tool": r.tool,
                "decision": r.decision,
                "tenant": r.tenant,
                "environment": r.environment,
                "agent": r.agent,
                "when": None if r.when is None else _condition(r.when),
            }
            for r in rules.rules
        ],
        "error": error,
    }


def _condition(c: Condition) -> str:
    if c.op in ("all", "any"):
        return f"{c.op}(" + ", ".join(_condition(k) for k in c.children) + ")"
    if c.op == "not":
        return f"not({_condition(c.children[0])})"
    return f"{c.field} {c.op} {json.dumps(c.value, ensure_ascii=False)}"
