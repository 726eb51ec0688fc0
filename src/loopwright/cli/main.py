"""The `loopwright` command: parse arguments, hand them to the command's module, turn problems
into one clear line plus a hint.

The CLI is a thin shell over the runtime (`loopwright.runtime.Runtime`): `run` sends a message
and renders the run through `render.Human` (answer on stdout, progress on stderr) or
`render.JsonLines` (`--json`); the other commands read and resolve what the event log holds
through the same runtime. A run's stop reason is its exit status (see `EXIT_CODES` and
`--help`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import (
    ConfigError,
    LoopwrightError,
    SessionBusy,
    UnknownPending,
    UnknownSession,
)
from . import acp, agents, approvals, chat, evals, new, rules, run, serve, sessions, usage
from . import replay as replays
from .common import EPILOG, EXIT_CODES, USAGE_ERROR, CliError, config_error
from .logs import redact_logs

__all__ = ["EXIT_CODES", "USAGE_ERROR", "CliError", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `loopwright` console script; returns the exit status."""
    parser = build_parser()
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwright",
        description="Run AI agents: one transparent loop, typed events, gated tools.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run.add_parser(commands)
    chat.add_parser(commands)
    new.add_parsers(commands)
    agents.add_parser(commands)
    sessions.add_parser(commands)
    approvals.add_parser(commands)
    usage.add_parser(commands)
    rules.add_parser(commands)
    serve.add_parsers(commands)
    acp.add_parser(commands)
    replays.add_parser(commands)
    evals.add_parser(commands)
    demo = commands.add_parser(
        "demo",
        help="run the bundled support agent end to end (offline)",
        description="Run the bundled support agent (examples/agents/support) on its scripted model: it "
        "looks up an order, asks you to approve a refund, and answers. No network, no API key.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_output_options(demo)
    demo.set_defaults(handler=_demo)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from .demo import demo

    return demo(args)


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
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopwright")
    except PackageNotFoundError:
        return "unknown"
