"""`loopwright demo`: the bundled support agent, end to end, offline (not stored).

The example lives in the repository's `examples/agents/support` folder, next to `src/`; it is there
when loopwright is installed from a clone (`pip install -e .`), and missing from a wheel.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import loopwright

from ..errors import ConfigError
from ..loop.session import Session
from .common import EXIT_CODES, CliError, load_agent_file
from .runner import drive

MESSAGE = "Hi, my order A-1001 arrived damaged. Can I get a refund?"


def example_dir() -> Path:
    """The support example's folder (it may not exist outside a clone)."""
    return Path(loopwright.__file__).resolve().parents[2] / "examples" / "agents" / "support"


def demo(args: argparse.Namespace) -> int:
    folder = example_dir()
    if not (folder / "agent.py").is_file():
        raise CliError(
            f"the demo agent is not here (looked for {folder}/agent.py): it ships with a clone "
            "of the repository, not with the package",
            hint="git clone the loopwright repository, `pip install -e .` inside it, and run "
            "`loopwright demo` again",
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
