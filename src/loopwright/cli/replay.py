"""`loopwright replay SESSION`: replay a stored session (an id in the project's store, or an
exported JSON lines file) against today's agent, on the recorded model replies (or a live
model with `--model`), and report what changed. Exit status 0 when nothing changed, 1 when
something did, 2 for bad input (docs/replay.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .common import CliError, Place, add_place_options, opt, place_of, print_json

if TYPE_CHECKING:
    from ..agent import Agent
    from ..replays import ReplayReport

CHANGED = 1
"""The exit status when the replay differs from the recording."""

EPILOG = """\
exit status:
  0    nothing changed: today's agent did what the recording did
  1    something changed (the differences are listed)
  2    usage or configuration error (an unknown session, a bad file, an unknown agent or model)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "replay",
        help="replay a stored session against today's agent and report what changed",
        description="Run a stored session's inputs (and the decisions it recorded) through "
        "today's agent — its code, prompt, rules, tools and hooks — with the recorded model "
        "replies standing in for the model (offline, deterministic), and list what changed: "
        "decisions, tool calls and arguments, results, the final answer, the stop reason.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "session",
        metavar="SESSION",
        help="a stored session id, or an exported session (`loopwright sessions export`)",
    )
    parser.add_argument(
        "--agent", metavar="NAME", help="the agent to replay against (default: the session's)"
    )
    parser.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="ask this live model instead of replaying the recorded replies",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_place_options(parser)
    parser.set_defaults(handler=replay_command)


def replay_command(args: argparse.Namespace) -> int:
    import asyncio

    place = place_of(args)
    report = asyncio.run(_replay(place, args))
    if args.json:
        print_json(report.to_json())
    else:
        print(report.render())
    return 0 if report.ok else CHANGED


async def _replay(place: Place, args: argparse.Namespace) -> ReplayReport:
    from ..replays import RecordingError, read_recording, replay_session

    given = Path(args.session)
    if given.suffix == ".jsonl" or given.is_file():
        try:
            stored = read_recording(given)
        except RecordingError as exc:
            raise CliError(
                str(exc), hint="export one with `loopwright sessions export ID --out FILE`"
            ) from None
        agent = _agent(place, opt(args, "agent"))
        return await replay_session(agent, stored, model=args.model, tenant=place.tenant)
    from ..runtime.replaying import replay_stored
    from .runner import opened
    from .sessions import find

    async with opened(place, {}) as runtime:
        key = (await find(runtime, place, args.session, opt(args, "agent"))).key
        return await replay_stored(runtime, key, agent=place.agent(key.agent), model=args.model)


def _agent(place: Place, name: str | None) -> Agent:
    """The agent a file is replayed against: the one named, or the place's only one."""
    if name is not None:
        return place.agent(name)
    agents = place.agents()
    if len(agents) != 1:
        known = ", ".join(sorted(agents)) or "none"
        raise CliError(
            f"which agent should the session be replayed against? (agents: {known})",
            hint="say which with --agent NAME",
        )
    return next(iter(agents.values()))
