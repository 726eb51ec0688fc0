"""The `loopwright` command: parse arguments, load an agent, run it, render its events.

The CLI is a thin shell over `Session.run`: everything it shows comes from the event stream,
rendered by `render.Human` (answer on stdout, progress on stderr) or `render.JsonLines`
(`--json`). A run's stop reason is its exit status (see `EXIT_CODES` and `loopwright --help`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from .. import events as ev
from ..agent import Agent
from ..approvals import Approver, approve_all
from ..errors import ConfigError
from ..session import Session
from .render import Console, Human, JsonLines, TerminalApprover, running_in_terminal

EXIT_CODES: dict[ev.RunStopReason, int] = {
    "completed": 0,
    "terminated": 0,
    "error": 1,
    "paused": 3,
    "denied": 4,
    "max_turns": 5,
    "aborted": 130,
}
USAGE_ERROR = 2

EPILOG = """\
exit status:
  0    the run completed (or a tool or policy ended it on purpose)
  1    the run failed (the model kept failing, a hook raised, ...)
  2    usage or configuration error (bad arguments, agent folder, rules or model)
  3    paused: a tool call waits for an approval nobody could give here
  4    a tool call was denied
  5    the step limit (max_turns) was reached without a final answer
  130  cancelled with Ctrl-C
"""


class CliError(Exception):
    """A usage or configuration problem: one line for the person, plus a hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.hint = hint


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
    try:
        if args.command == "demo":
            from .demo import demo

            return demo(args)
        return run_command(args)
    except CliError as exc:
        print(f"loopwright: error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_CODES["aborted"]
    except BrokenPipeError:  # `loopwright run ... | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="loopwright",
        description="Run AI agents: one transparent loop, typed events, gated tools.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"loopwright {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run one message through an agent",
        description="Run one message through the agent defined in AGENT_DIR/agent.py. The answer "
        "goes to stdout, progress (tool calls, results, decisions) to stderr.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    run.add_argument(
        "agent_dir",
        metavar="AGENT_DIR",
        help="folder whose agent.py exports `agent` (or the agent.py itself)",
    )
    run.add_argument(
        "message",
        metavar="MESSAGE",
        nargs="*",
        default=[],
        help="the message to send (words are joined with spaces)",
    )
    run.add_argument(
        "--input",
        metavar="TEXT",
        help="the message to send, instead of MESSAGE ('-' reads it from stdin)",
    )
    _add_output_options(run)

    demo = commands.add_parser(
        "demo",
        help="run the bundled support agent end to end (offline)",
        description="Run the bundled support agent (examples/support) on its scripted model: it "
        "looks up an order, asks you to approve a refund, and answers. No network, no API key.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    _add_output_options(demo)
    return parser


def _add_output_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--json",
        action="store_true",
        help="print every event as one JSON object per line on stdout",
    )
    command.add_argument(
        "--profile",
        choices=["full", "v1"],
        default="full",
        help="with --json: 'v1' keeps only loopengine v1 events (default: full)",
    )
    command.add_argument(
        "--yes", "-y", action="store_true", help="approve every tool call that asks for approval"
    )


def run_command(args: argparse.Namespace) -> int:
    message = _message(args)
    agent = load_agent(args.agent_dir)
    return run_agent(agent, message, args)


def _message(args: argparse.Namespace) -> str:
    if args.input is not None and args.message:
        raise CliError("give the message either as MESSAGE or with --input, not both")
    text = args.input if args.input is not None else " ".join(args.message)
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise CliError(
            "no message to send", hint='loopwright run AGENT_DIR "your message" (or --input TEXT)'
        )
    return text.strip()


def load_agent(target: str) -> Agent:
    """The `agent` exported by `target/agent.py` (or by `target` itself, if it is a file)."""
    path = Path(target)
    if not path.exists() and (Path("agents") / target).is_dir():
        path = Path("agents") / target
    if not path.exists():
        raise CliError(
            f"no agent folder at {target}",
            hint="pass a folder holding agent.py, e.g. `loopwright run examples/support`",
        )
    file = path if path.is_file() else path / "agent.py"
    if not file.is_file():
        raise CliError(
            f"{path} has no agent.py",
            hint="an agent folder holds agent.py, which defines `agent = Agent(...)`",
        )
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
    return agent


def run_agent(agent: Agent, message: str, args: argparse.Namespace, *, demo: bool = False) -> int:
    """Run `message` through `agent`, render it as the arguments say; return the exit status."""
    try:
        session = Session(agent)
    except ConfigError as exc:
        raise CliError(str(exc), hint="check the agent's rules file") from None
    done = asyncio.run(_stream(session, message, args, demo=demo))
    if done.stop_reason == "paused":
        print(
            "loopwright: the run is paused, waiting for an approval that nobody could give here. "
            "Resolving it from another terminal arrives with `loopwright approvals` (a later "
            "issue); for now run the command in a terminal to answer the prompt, or pass --yes "
            "to approve every call.",
            file=sys.stderr,
        )
    return EXIT_CODES[done.stop_reason]


async def _stream(
    session: Session, message: str, args: argparse.Namespace, *, demo: bool
) -> ev.Done:
    console = Console(sys.stdout, sys.stderr)
    approver = _approver(args, console, demo=demo)
    renderer: Human | JsonLines
    if args.json:
        renderer = JsonLines(console, args.profile)
    else:
        live = isinstance(approver, TerminalApprover)
        renderer = Human(console, live_approver=live)
    try:
        run = session.run(message, approver=approver)
    except ConfigError as exc:
        raise CliError(str(exc), hint="check the agent's model") from None
    done: ev.Done | None = None
    with _cancel_on_interrupt(run.cancel):
        async with run:
            async for event in run:
                renderer.show(event)
                if isinstance(event, ev.Done):
                    done = event
    assert done is not None, "a run always ends with done"
    return done


def _approver(args: argparse.Namespace, console: Console, *, demo: bool) -> Approver | None:
    """Who answers `ask` decisions: --yes, the person at the terminal, or nobody (pause)."""
    if args.yes:
        return approve_all
    if running_in_terminal():
        return TerminalApprover(sys.stdin, console)
    if demo:
        print(
            "(no terminal: approving automatically — run in a terminal to answer the prompt "
            "yourself)",
            file=sys.stderr,
        )
        return approve_all
    return None


@contextmanager
def _cancel_on_interrupt(cancel: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C cancels the run (it still ends with loop:aborted and done); a second one quits."""
    loop = asyncio.get_running_loop()
    count = 0

    def interrupt() -> None:
        nonlocal count
        count += 1
        if count > 1:
            _quit_now()
        print("\n(cancelling — press Ctrl-C again to quit at once)", file=sys.stderr, flush=True)
        cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (NotImplementedError, RuntimeError, ValueError):  # no handlers here (Windows)
        yield  # KeyboardInterrupt cancels the main task instead
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _quit_now() -> NoReturn:
    sys.stdout.flush()
    os._exit(EXIT_CODES["aborted"])


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopwright")
    except PackageNotFoundError:
        return "unknown"
