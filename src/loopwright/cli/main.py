"""The `loopwright` command: parse arguments, hand them to the command's module, turn problems
into one clear line plus a hint.

The CLI is a thin shell over the runtime (`loopwright.runtime.Runtime`): `run` sends a message
and renders the run through `render.Human` (answer on stdout, progress on stderr) or
`render.JsonLines` (`--json`); the other commands read and resolve what the event log holds
through the same runtime. A run's stop reason is its exit status (see `EXIT_CODES` and
`--help`).

Each command's module is imported only when that command is chosen: `--help` and `--version`
list the commands from `COMMANDS`, a table of names and help lines (tests/test_package.py
checks it against the modules' own parsers).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Sequence
from importlib import import_module
from typing import Any

from ..errors import (
    ConfigError,
    LoopwrightError,
    SessionBusy,
    UnknownPending,
    UnknownSession,
)
from .common import EPILOG, EXIT_CODES, USAGE_ERROR, CliError, config_error
from .logs import redact_logs

__all__ = ["COMMANDS", "EXIT_CODES", "USAGE_ERROR", "CliError", "build_parser", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run one message through an agent (stored as a session)"),
    "chat": ("chat", "talk with an agent in the terminal (a stored conversation)"),
    "new": ("new", "scaffold an agent (NAME or PARENT/CHILD for a subagent)"),
    "init": ("new", "create a project (loopwright.toml, .gitignore, an example agent)"),
    "agents": ("agents", "list the project's agents, or show one's resolved configuration"),
    "sessions": ("sessions", "list, show, export, compact, fork or watch sessions"),
    "approvals": ("approvals", "list and resolve pending approvals and questions"),
    "usage": ("usage", "model requests, tokens and cost, summed"),
    "rules": ("rules", "try a changed rules file on the stored calls"),
    "serve": ("serve", "serve the project's agents over HTTP, with the web playground"),
    "dev": (
        "serve",
        "serve the project's agents over HTTP, with the web playground (reloading on changes)",
    ),
    "acp": (
        "acp",
        "speak the Agent Client Protocol on stdio (for editors: Zed, JetBrains, Neovim...)",
    ),
    "replay": ("replay", "replay a stored session against today's agent and report what changed"),
    "eval": ("evals", "run a dataset of cases against an agent (or `eval add SESSION`)"),
    "demo": ("demo", "run the bundled support agent end to end (offline)"),
}
"""Each command: the module of `loopwright.cli` whose `add_parsers` (or `add_parser`) builds its
parser, and its line in `--help`."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `loopwright` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(chosen(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:  # message words after options: `run AGENT --json "hello"`
        if args.command != "run" or any(word.startswith("-") for word in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.message += extra
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    redact_logs()
    try:
        try:
            return int(args.handler(args))
        except ConfigError as exc:
            raise config_error(exc) from None
        except (UnknownSession, UnknownPending) as exc:
            hint = "`loopwright sessions` and `loopwright approvals` list what there is"
            raise CliError(f"{exc}", hint=hint + " (check --project and --tenant)") from None
        except SessionBusy as exc:
            raise CliError(str(exc), hint="one run at a time per session: wait for it") from None
        except (_store_error(), LoopwrightError) as exc:  # (the store: loaded by then)
            raise CliError(str(exc), hint="see `loopwright --help`") from None
    except CliError as exc:
        print(f"loopwright: error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_CODES["aborted"]
    except BrokenPipeError:  # `loopwright run ... | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def chosen(argv: Sequence[str]) -> list[str]:
    """The command an argument list chooses (the first word: the program's own options take no
    value), or none."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return [first] if first in COMMANDS else []


def build_parser(full: Collection[str] = COMMANDS) -> argparse.ArgumentParser:
    """The command line's parser, with the commands of `full` built by their modules (every
    command by default) and the others as a name and a help line only."""
    parser = argparse.ArgumentParser(
        prog="loopwright",
        description="Run AI agents: one transparent loop, typed events, gated tools.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = {COMMANDS[name][0] for name in full}  # (a module may build several commands)
    for name, (module, line) in COMMANDS.items():
        if name in commands.choices:
            continue
        if module in modules:
            found = import_module(f".{module}", __package__)
            (getattr(found, "add_parsers", None) or found.add_parser)(commands)
        else:
            commands.add_parser(name, help=line, add_help=False)
    return parser


def _store_error() -> type[Exception]:
    from ..store import StoreError

    return StoreError


class _Version(argparse._VersionAction):
    """argparse's `version` action, with the version looked up only when it is asked for (the
    package metadata costs more to import than the rest of the command line's start)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        self.version = f"loopwright {_version()}"
        super().__call__(parser, *args, **kwargs)


def _version() -> str:
    from .._version import __version__

    return __version__
