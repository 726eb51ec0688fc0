"""What every command shares: the usage error, exit statuses, where the project and its event
log are, how an agent is found (by name in a project, or by folder), and small output helpers."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .. import events as ev
    from ..agent import Agent
    from ..project import Project
    from ..store.log import Store

EXIT_CODES: dict[ev.RunStopReason, int] = {
    "completed": 0,
    "terminated": 0,
    "error": 1,
    "paused": 3,
    "denied": 4,
    "max_turns": 5,
    "max_tokens": 7,
    "aborted": 130,
}
USAGE_ERROR = 2


def exit_status(done: ev.Done, profile: str = "full") -> int:
    """The exit status of a run that ended with `done`. With `--profile v1` a `max_tokens` run
    exits 0, as before it was a stop reason of its own (v1 still calls it `completed`)."""
    v1_completed = profile == "v1" and done.stop_reason == "max_tokens"
    return EXIT_CODES["completed" if v1_completed else done.stop_reason]


EPILOG = """\
exit status:
  0    the run completed (or a tool or policy ended it on purpose); a command succeeded
  1    the run failed (the model kept failing, a hook raised, ...)
  2    usage or configuration error (bad arguments, agent folder, rules or model; an unknown
       session or pending item; an invalid edit)
  3    paused: a tool call waits for an approval nobody could give here
  4    a tool call was denied
  5    the step limit (max_turns) was reached without a final answer
  6    `run`: a tool call or question needed the person at the terminal, but stderr is not a
       terminal, so the prompt could not be shown (the run is paused, its items open)
  7    the answer was cut by the model's output limit (printed as far as it goes; 0 with
       --profile v1, which calls such a run completed)
  130  cancelled with Ctrl-C
"""
NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


class CliError(Exception):
    """A usage or configuration problem: one line for the person, plus a hint."""

    def __init__(self, message: str, hint: str | None = None, *, code: int = USAGE_ERROR) -> None:
        super().__init__(" ".join(message.split()))
        self.hint = hint
        self.code = code
        """The exit status (a usage error unless said otherwise)."""


def add_place_options(parser: argparse.ArgumentParser, *, tenant: bool = True) -> None:
    """`--project DIR` (and `--tenant`); SUPPRESS defaults, so that the options may be given
    before or after a sub-command without one level's default hiding the other's value."""
    parser.add_argument(
        "--project",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="the project folder (default: the current directory)",
    )
    if tenant:
        parser.add_argument(
            "--tenant",
            default=argparse.SUPPRESS,
            help="the tenant whose sessions and pending items are used (default: default)",
        )


def add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help=f"print {what} as JSON"
    )


def opt(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(args, name, default)


def tenant_of(args: argparse.Namespace) -> str:
    return str(opt(args, "tenant") or "default")


def shown(path: str | Path) -> str:
    """A path as a person would type it: relative to the current directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(path)


def config_error(exc: ConfigError, hint: str | None = None) -> CliError:
    """A discovery error as one line, with paths made relative to the current directory."""
    text = str(exc).replace(str(Path.cwd().resolve()) + os.sep, "")
    return CliError(text, hint=hint or "fix the file and line named above")


def is_agent_folder(path: Path) -> bool:
    return (path / "agent.py").is_file() or (path / "agent.yaml").is_file()


@dataclass(slots=True)
class Place:
    """Where agents and sessions live: a project folder, or a bare agent folder (its sessions
    are stored in `<folder>/.loopwright`, and `--project <folder>` finds them again)."""

    root: Path
    tenant: str = "default"
    bare: bool = False
    """`root` is an agent folder, not a project."""
    _project: Project | None = None
    _agent: Agent | None = None

    @property
    def is_project(self) -> bool:
        return not self.bare and (
            (self.root / "loopwright.toml").is_file() or (self.root / "agents").is_dir()
        )

    def require_project(self) -> None:
        if not self.bare and not self.is_project:
            raise CliError(
                f"{self.name()} is not a loopwright project (no loopwright.toml or agents/)",
                hint="`loopwright init` creates one; or pass --project DIR",
            )

    def name(self) -> str:
        if self.root.resolve() == Path.cwd().resolve():
            return "the current directory"
        return shown(self.root)

    def store_path(self) -> Path:
        from ..project import Project

        if self.bare:
            home = os.environ.get("LOOPWRIGHT_HOME")
            return Path(home) / "loopwright.db" if home else self.root / ".loopwright/loopwright.db"
        return Project(root=self.root, settings=self.settings()).store_path()

    def store_url(self) -> str | Path:
        """Where the event log is (`Project.store_url`; a bare folder's file otherwise)."""
        from ..project import Project

        if self.bare:
            return os.environ.get("LOOPWRIGHT_STORE_URL") or self.store_path()
        return Project(root=self.root, settings=self.settings()).store_url()

    def store_pool_size(self) -> int | None:
        """A PostgreSQL log's pool size (`Project.store_pool_size`; only the environment's in a
        bare folder)."""
        from ..project import Project

        if self.bare:
            return Project(root=self.root).store_pool_size()
        return Project(root=self.root, settings=self.settings()).store_pool_size()

    def store_shown(self) -> str:
        """Where the event log is, as messages name it: the SQLite file, or the PostgreSQL
        database (never its password)."""
        from ..store.log import is_postgres

        where = self.store_url()
        if isinstance(where, str) and is_postgres(where):
            from ..store.pg_schema import shown as database

            return database(where)
        if isinstance(where, str):
            return where.removeprefix("sqlite:///")
        return str(where)

    def settings(self) -> dict[str, Any]:
        """loopwright.toml, read without loading any agent."""
        import tomllib

        toml = self.root / "loopwright.toml"
        if not toml.is_file():
            return {}
        try:
            text = toml.read_text()
            settings = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CliError(
                f"{shown(toml)}: invalid TOML: {exc}", hint="fix loopwright.toml"
            ) from None
        except OSError as exc:
            raise CliError(f"cannot read {shown(toml)}: {exc.strerror}") from None
        from ..project.config import check

        try:
            check(settings, text, shown(toml))
        except ConfigError as exc:
            raise config_error(exc, hint="fix loopwright.toml") from None
        return settings

    async def log(self) -> Store:
        """The place's event log (created on first use, inside a project or a bare folder)."""
        from ..store import StoreError
        from ..store.opening import open_log

        if not os.environ.get("LOOPWRIGHT_HOME"):
            self.require_project()  # never create a log in a folder that is not ours
        try:
            return await open_log(self.store_url(), pool_size=self.store_pool_size())
        except StoreError as exc:
            hint = "check [store] in loopwright.toml (or $LOOPWRIGHT_STORE_URL)"
            raise CliError(str(exc), hint=hint) from None

    def agents(self) -> dict[str, Agent]:
        """Every agent here (a bare folder holds one)."""
        if self.bare:
            if self._agent is None:
                self._agent = load_agent_folder(self.root)
            return {self._agent.name: self._agent}
        return dict(self.project().agents)

    def project(self) -> Project:
        from ..project import load_project

        if self._project is None:
            try:
                self._project = load_project(self.root)
            except ConfigError as exc:
                raise config_error(exc) from None
        return self._project

    def agent(self, name: str) -> Agent:
        """The agent called `name` here."""
        if self.bare:
            if self._agent is None:
                self._agent = load_agent_folder(self.root)
            if self._agent.name != name:
                raise CliError(f"{shown(self.root)} holds agent {self._agent.name!r}, not {name!r}")
            return self._agent
        project = self.project()
        if name not in project.agents:
            known = ", ".join(sorted(project.agents)) or "none"
            raise CliError(
                f"no agent named {name!r} in {self.name()} (agents: {known})",
                hint=f"`loopwright agents{self.flags()}` lists them; "
                f"`loopwright new {name}` creates one",
            )
        return project.agents[name]

    def flags(self, *, run: bool = False) -> str:
        """The options a suggested command needs to find this place again (`run` finds a bare
        folder by its path, given as AGENT)."""
        words = []
        if self.root.resolve() != Path.cwd().resolve() and not (run and self.bare):
            words += ["--project", shown(self.root)]
        if self.tenant != "default":
            words += ["--tenant", self.tenant]
        return "".join(" " + shlex.quote(w) for w in words)


def folder_ref(folder: Path) -> str:
    """An agent folder as `loopwright run` AGENT: a path that cannot be taken for a name."""
    text = shown(folder)
    return text if "/" in text or text == "." else f"./{text}"


def place_of(args: argparse.Namespace) -> Place:
    """`--project DIR` (or the current directory) as a project or a bare agent folder."""
    given = opt(args, "project")
    root = Path(given or ".").resolve()
    if given is not None and not root.is_dir():
        raise CliError(f"no project folder at {given}", hint="pass an existing folder to --project")
    project_like = (root / "loopwright.toml").is_file() or (root / "agents").is_dir()
    return Place(root, tenant_of(args), bare=not project_like and is_agent_folder(root))


def load_agent_folder(folder: Path) -> Agent:
    """An agent folder: agent.py (which exports `agent`) or agent.yaml."""
    if (folder / "agent.py").is_file():
        return load_agent_file(folder / "agent.py")
    from ..project import load_agent

    try:
        return load_agent(folder)
    except ConfigError as exc:
        raise config_error(exc) from None


def load_agent_file(file: Path) -> Agent:
    """The `agent` exported by an agent.py (it may import its neighbours, like tools.py)."""
    import importlib.util

    from ..agent import Agent

    folder = file.resolve().parent
    name = "loopwright_agent_" + "".join(c if c.isalnum() else "_" for c in folder.name)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {file} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(folder))  # so agent.py can import its neighbours (tools.py, ...)
    try:
        spec.loader.exec_module(module)
    except ConfigError as exc:
        raise CliError(f"{file}: {exc}", hint="fix the agent's configuration") from None
    except Exception as exc:
        raise CliError(
            f"{file} failed to import: {type(exc).__name__}: {exc}",
            hint=f"run `python {file}` to see the full traceback",
        ) from None
    agent = getattr(module, "agent", None)
    if not isinstance(agent, Agent):
        found = "nothing" if agent is None else f"a {type(agent).__name__}"
        raise CliError(
            f"{file} must export `agent`, a loopwright.Agent (found {found})",
            hint="add `agent = Agent(name=..., model=..., tools=[...])` to agent.py",
        )
    from ..plugins import with_plugins  # the plugins' hooks, as for a project's agents
    from ..project import _rules_beside  # the folder's rules.yaml, as in a project

    try:
        return with_plugins(_rules_beside(agent, folder, file.name))
    except ConfigError as exc:
        raise config_error(exc) from None


def check_name(name: str, what: str = "agent name") -> str:
    from ..project import NAME_RULE

    if not NAME.fullmatch(name):
        raise CliError(
            f"invalid {what} {name!r}: {NAME_RULE}", hint="e.g. `loopwright new support`"
        )
    return name


def model_name(agent: Agent) -> str:
    model = agent.model
    if isinstance(model, str):
        provider, _, rest = model.partition(":")
        return f"scripted:{shown(rest)}" if provider == "scripted" else model
    return str(getattr(model, "name", type(model).__name__))


def one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(1, width - 1)] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell (the last one is not padded)."""
    cells = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)] + [row[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def user_name() -> str:
    """Who decides at this terminal, as decisions record it (`runtime.decisions`)."""
    from ..runtime.decisions import terminal_user

    return terminal_user()


def print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, default=str))
