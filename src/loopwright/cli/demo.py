"""`loopwright demo`: the bundled support agent, end to end, offline (not stored).

The example lives in the repository's `examples/agents/support` folder, next to `src/` (an install
from a clone, `pip install -e .`, reads it there); a wheel ships the folder in the package as
`loopwright/examples` (setup.py copies it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import loopwright

from ..errors import ConfigError
from ..loop.session import Session
from .common import EPILOG, EXIT_CODES, CliError, load_agent_file
from .run import add_output_options
from .runner import drive

MESSAGE = "Hi, my order A-1001 arrived damaged. Can I get a refund?"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "demo",
        help="run the bundled support agent end to end (offline)",
        description="Run the bundled support agent (examples/agents/support) on its scripted model: it "
        "looks up an order, asks you to approve a refund, and answers. No network, no API key.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_output_options(parser)
    parser.set_defaults(handler=demo)


def example_dir() -> Path:
    """The support example's folder: the wheel's copy, else the clone's."""
    package = Path(loopwright.__file__).resolve().parent
    shipped = package / "examples"
    return (shipped if shipped.is_dir() else package.parents[1] / "examples") / "agents" / "support"


def demo(args: argparse.Namespace) -> int:
    folder = example_dir()
    if not (folder / "agent.py").is_file():
        raise CliError(
            f"the demo agent is not here (looked for {folder}/agent.py): the package was "
            "installed without its examples",
            hint="reinstall loopwright from its wheel, or `pip install -e .` in a clone",
        )
    agent = load_agent_file(folder / "agent.py")
    if not args.json:
        print(
            f"loopwright demo · the {agent.name!r} agent from {folder} on a scripted model "
            "(no network, no API key)",
            file=sys.stderr,
        )
        print(f"› {MESSAGE}", file=sys.stderr)
    try:
        session = Session(agent)
    except ConfigError as exc:
        raise CliError(str(exc), hint="check the agent's rules file") from None
    done = drive(lambda approver: session.run(MESSAGE, approver=approver), args, demo=True)
    return EXIT_CODES[done.stop_reason]
