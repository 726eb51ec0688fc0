"""`loopwright acp AGENT`: the agent over the Agent Client Protocol on stdio, for editors.

stdout carries the protocol and nothing else; logs go to stderr (`--verbose` for more). AGENT is
found as `loopwright run` finds it (a name in the project, or an agent folder), and its sessions
are the project's durable sessions: `session/load` finds any of them again, and a session an
editor left paused can be resolved from `loopwright approvals` (see docs/acp.md).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from .common import EPILOG, CliError, Place, add_place_options
from .logs import everything_to_stderr

if TYPE_CHECKING:
    from ..agent import Agent


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "acp",
        help="speak the Agent Client Protocol on stdio (for editors: Zed, JetBrains, Neovim...)",
        description="Serve AGENT over the Agent Client Protocol on stdin/stdout, for an editor "
        "or another ACP client to start as its agent (e.g. in Zed's settings: "
        '"agent_servers": {"support": {"command": "loopwright", "args": ["acp", "support"]}}). '
        "Sessions are stored in the project; tool calls that need approval are asked in the "
        "editor. Needs the extra: pip install 'loopwright[acp]'.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("agent", metavar="AGENT", help="an agent's name, or an agent folder")
    command.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="log at debug level (on stderr, as every log line)",
    )
    add_place_options(command)
    command.set_defaults(handler=acp_command, message=[])


def acp_command(args: argparse.Namespace) -> int:
    import asyncio

    from .run import find_agent

    try:
        import acp  # noqa: F401
    except ImportError:
        raise CliError(
            "the Agent Client Protocol SDK is not installed",
            hint="pip install 'loopwright[acp]'",
        ) from None
    everything_to_stderr(
        logging.DEBUG if args.verbose else logging.INFO,
        "loopwright acp: %(levelname)s %(name)s: %(message)s",
    )
    agent, place, _ = find_agent(args)
    asyncio.run(_serve(agent, place))
    return 0


async def _serve(agent: Agent, place: Place) -> None:
    from ..acp import serve
    from .runner import handoff_targets, opened

    async with opened(place, {**handoff_targets(place, agent), agent.name: agent}) as runtime:
        await serve(runtime, agent, place.tenant, str(place.root))
