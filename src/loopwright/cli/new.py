"""`loopwright new NAME` / `new PARENT/CHILD` scaffold an agent; `loopwright init [DIR]` makes a
new project with an example agent. Nothing that exists is ever overwritten."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import CliError, add_place_options, check_name, is_agent_folder, place_of, shown

AGENT_YAML = """\
# The {name} agent. Fields: name, description, instructions, model, fallback (models to switch
# to when it fails), settings (temperature, reasoning, ...), tools (extra tools by import path),
# builtins (ask_user, files, files-readonly), max_turns, on_deny, context_budget,
# max_output_tokens, tool_timeout, compaction, retry (docs/models.md: settings and fallback).
description: {description}
instructions: |
  You are {name}, a helpful assistant. Answer briefly and use your tools when they help.
{model_line}
max_turns: 10
"""
MODEL_OFFLINE = """\
# A scripted model (script.yaml) runs offline; use a real one, e.g. anthropic:claude-sonnet-4-5
# or openai:gpt-4.1, once its API key is set.
model: scripted:script.yaml"""
MODEL_DEFAULT = """\
# The model is [defaults] model in loopwright.toml ({model}); set one here to override it,
# e.g. `model: scripted:script.yaml` to run offline."""
SCRIPT_YAML = """\
# What the scripted model says: one reply per request, each conversation from the top (a
# conversation continued later goes on where it was). Replies can call tools, think and fail;
# the format is in docs/scripted-models.md of the loopwright repository.
replies:
  - text: "Hello! I am {name}, running on a scripted model. Set `model:` in agent.yaml to talk to a real one."
  - text: "That was my last scripted reply: add replies to script.yaml, or set a real model in agent.yaml."
"""
TOOLS_PY = '''\
"""Tools of the {name} agent: every @tool in this file is the agent's, found automatically."""

from loopwright import tool


@tool
def echo(text: str) -> str:
    """Repeat a text back (an example: replace it with your own tools).

    Args:
        text: What to repeat.
    """
    return text
'''
RULES_YAML = """\
# Who may do what without asking: the first rule that matches a call decides (allow, ask or
# deny); calls no rule matches get default_decision. Rules can match tool-name globs, conditions
# on the arguments and tenant/environment/agent scopes: see docs/rules.md of the loopwright
# repository (this file is re-read when it changes).
default_decision: ask
rules:
  - name: echo-freely
    tool: echo
    decision: allow
"""
LOOPWRIGHT_TOML = """\
# loopwright project settings. Agents live in agents/<name>/ (`loopwright new NAME` adds one);
# secrets go in .env, which is loaded automatically.

# [defaults]                    # applied to every agent.yaml that does not set its own
# model = "anthropic:claude-sonnet-4-5"
# max_turns = 25
# on_deny = "stop"

# [store]                       # where sessions are kept (SQLite); $LOOPWRIGHT_HOME overrides it
# path = ".loopwright/loopwright.db"
# url = "postgresql://user@host/db"   # or PostgreSQL, for many processes (loopwright[postgres]);
#                                     # $LOOPWRIGHT_STORE_URL overrides both

# [providers.local]             # an OpenAI-compatible endpoint, used as "local:MODEL"
# base_url = "http://localhost:11434/v1"
# api_key_env = "LOCAL_API_KEY"
# api_key_command = "gcloud auth print-access-token"   # or a key per request (+ api_key_ttl)
# dialect = "openai-chat"

# [server]                      # `loopwright serve`: loopback only unless you change host
# host = "127.0.0.1"
# port = 8787

# [[auth.token]]                # bearer tokens map clients to tenants (none: loopback only)
# env = "ACME_TOKEN"            # the token is read from this variable (16 characters at least)
# tenant = "acme"
"""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    new = commands.add_parser(
        "new",
        help="scaffold an agent (NAME or PARENT/CHILD for a subagent)",
        description="Create agents/NAME/ (agent.yaml, tools.py, rules.yaml, script.yaml), or "
        "agents/PARENT/subagents/CHILD/ for PARENT/CHILD. Names are lowercase words joined by "
        "hyphens. An existing agent is never overwritten.",
    )
    new.add_argument("name", metavar="NAME", help="the agent's name, or PARENT/CHILD")
    new.add_argument("--description", default="", help="one line saying what the agent does")
    add_place_options(new, tenant=False)
    new.set_defaults(handler=new_command)
    init = commands.add_parser(
        "init",
        help="create a project (loopwright.toml, .gitignore, an example agent)",
        description="Create a loopwright project in DIR (default: the current directory): a "
        "commented loopwright.toml, a .gitignore that leaves out .loopwright/, and "
        "agents/example, which runs offline: `loopwright run example hello`.",
    )
    init.add_argument("dir", metavar="DIR", nargs="?", default=".", help="the project folder")
    init.set_defaults(handler=init_command)


def new_command(args: argparse.Namespace) -> int:
    place = place_of(args)
    if not place.is_project:
        raise CliError(
            f"{shown(place.root)} is not a loopwright project (no loopwright.toml)",
            hint="`loopwright init` creates one here; or pass --project DIR",
        )
    folder = scaffold(place.root, args.name, args.description, place.settings())
    print(f"created {shown(folder)}/ (agent.yaml, tools.py, rules.yaml, script.yaml)")
    *parents, name = args.name.strip("/").split("/")
    if parents:
        print(f"{name} is a subagent: {parents[-1]} calls it as a tool", file=sys.stderr)
    else:
        print(f'try it: loopwright run {name} "hello"{place.flags()}', file=sys.stderr)
    return 0


def scaffold(root: Path, spec: str, description: str, settings: dict[str, object]) -> Path:
    """Write a new agent's files under `root/agents`; the folder created."""
    names = spec.strip("/").split("/")
    for name in names:
        check_name(name)
    folder = root / "agents" / names[0]
    for name in names[1:]:
        if not is_agent_folder(folder):
            raise CliError(
                f"no parent agent at {shown(folder)}",
                hint=f"create it first: loopwright new {'/'.join(names[: names.index(name)])}",
            )
        folder = folder / "subagents" / name
    if folder.exists():
        raise CliError(
            f"{shown(folder)} already exists: not overwriting it",
            hint="pick another name, or edit the agent's files",
        )
    name = names[-1]
    defaults = settings.get("defaults")
    model = defaults.get("model") if isinstance(defaults, dict) else None
    model_line = MODEL_DEFAULT.format(model=model) if model else MODEL_OFFLINE
    what = description or f"The {name} agent (describe what it does here)."
    files = {
        "agent.yaml": AGENT_YAML.format(
            name=name, description=_yaml_str(what), model_line=model_line
        ),
        "script.yaml": SCRIPT_YAML.format(name=name),
        "tools.py": TOOLS_PY.format(name=name),
        "rules.yaml": RULES_YAML,
    }
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text)
    return folder


def init_command(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if root.exists() and not root.is_dir():
        raise CliError(f"{args.dir} exists and is not a folder", hint="pick another DIR")
    toml = root / "loopwright.toml"
    if toml.is_file() and toml.read_text().strip():
        raise CliError(
            f"{shown(toml)} already exists: {shown(root)} is a project already",
            hint="add agents to it with `loopwright new NAME`",
        )
    root.mkdir(parents=True, exist_ok=True)
    toml.write_text(LOOPWRIGHT_TOML)
    ignore = root / ".gitignore"
    text = ignore.read_text() if ignore.is_file() else ""
    lines = text.splitlines()
    missing = [p for p in (".env", ".loopwright/") if p not in lines and "/" + p not in lines]
    if missing:
        with ignore.open("a") as out:
            out.write(
                ("" if text.endswith("\n") or not text else "\n")
                + "".join(p + "\n" for p in missing)
            )
    created = ["loopwright.toml", ".gitignore"]
    if not (root / "agents" / "example").exists():
        scaffold(root, "example", "An example agent that says hello.", {})
        created.append("agents/example/")
    print(f"created a loopwright project in {shown(root)}: {', '.join(created)}")
    cd = "" if root.resolve() == Path.cwd().resolve() else f"cd {shown(root)} && "
    print(f'try it: {cd}loopwright run example "hello"', file=sys.stderr)
    return 0


def _yaml_str(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid YAML scalar
