"""`loopwright new NAME` / `new PARENT/CHILD` scaffold an agent; `loopwright init [DIR]` makes a
new project with an example agent. Nothing that exists is ever overwritten."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..project.agent_yaml import BUILTINS
from ..project.scaffold import Options, agent_files
from .common import CliError, add_place_options, check_name, is_agent_folder, place_of, shown

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
    new.add_argument(
        "--model", metavar="PROVIDER:MODEL", help="its model (default: a scripted one, offline)"
    )
    new.add_argument(
        "--prompt",
        metavar="TEXT|@FILE",
        help="its instructions, or @FILE to copy them from a file (written to prompt.md)",
    )
    new.add_argument(
        "--tools",
        metavar="A,B,...",
        help=f"built-in tools it gets, comma-separated: {', '.join(BUILTINS)}",
    )
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
    model = _model(args.model)
    options = Options(args.description, model, _prompt(args.prompt), _tools(args.tools))
    folder = scaffold(place.root, args.name, options, place.settings())
    written = sorted(p.name for p in folder.iterdir())
    print(f"created {shown(folder)}/ ({', '.join(written)})")
    *parents, name = args.name.strip("/").split("/")
    if parents:
        print(f"{name} is a subagent: {parents[-1]} calls it as a tool", file=sys.stderr)
    else:
        print(f'try it: loopwright run {name} "hello"{place.flags()}', file=sys.stderr)
    return 0


def scaffold(root: Path, spec: str, options: Options | str, settings: dict[str, object]) -> Path:
    """Write a new agent's files under `root/agents`; the folder created. `options`: a
    description alone, or `Options`."""
    if isinstance(options, str):
        options = Options(description=options)
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
    files = agent_files(name, options, settings)
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text)
    if {"files", "files-readonly", "shell"} & set(options.tools):
        (folder / "workspace").mkdir()  # (where those tools work)
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


def _model(given: str | None) -> str | None:
    """`--model provider:model`, its provider checked as the loader does."""
    if given is None:
        return None
    from ..models.registry import providers_known

    provider, sep, rest = given.partition(":")
    known = providers_known(provider)
    if not sep or not rest or provider not in known:
        raise CliError(
            f"unknown model {given!r}",
            hint=f"use provider:model with one of: {', '.join(known)}",
        )
    return given


def _prompt(given: str | None) -> str | None:
    """`--prompt`: the text, or the contents of the file `@FILE` names."""
    if given is None or not given.startswith("@"):
        return given
    path = Path(given[1:])
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(
            f"cannot read the prompt file {given[1:]}: {exc.strerror}",
            hint="--prompt takes a text, or @FILE naming a readable file",
        ) from None


def _tools(given: str | None) -> tuple[str, ...]:
    """`--tools a,b`: built-in tools, each checked."""
    names = tuple(n.strip() for n in (given or "").split(",") if n.strip())
    unknown = [n for n in names if n not in BUILTINS]
    if unknown:
        raise CliError(
            f"unknown tool{'s' * (len(unknown) > 1)}: {', '.join(unknown)}",
            hint=f"the built-in tools are: {', '.join(BUILTINS)}",
        )
    return tuple(dict.fromkeys(names))
