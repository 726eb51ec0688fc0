"""`loopwright sessions fork ID [--at SEQ]`: a new session whose history is the session's up to
seq SEQ (its last by default), its lineage recorded (`runtime.forking`); prints the new id."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from .common import CliError, Place, add_json_option, add_place_options, opt, place_of, print_json

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..store.log import SessionRecord

Find = Callable[["Runtime", Place, str, "str | None"], Awaitable["SessionRecord"]]


def add_action(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    find: Find,
    as_row: Callable[[SessionRecord, str | None], dict[str, Any]],
) -> None:
    """`sessions fork` (beside `sessions show`, `export`, `compact`), finding the session and
    printing it as `cli.sessions` does (`find`, `as_row`: given, not imported)."""
    parser = actions.add_parser(
        "fork",
        help="start a new session from a seq of a session (its history up to there)",
        description="Copy the session's events 1..SEQ into a new session (the original is "
        "untouched) and print the new session's id; send it a message with "
        "`loopwright run AGENT --session NEW_ID ...`. An approval left open at SEQ is open in "
        "the fork, to decide anew; a SEQ inside a run is recovered as a run that died there.",
    )
    parser.add_argument("id", metavar="ID", help="the session id (see `loopwright sessions`)")
    parser.add_argument("--at", metavar="SEQ", type=int, help="the last seq to copy (default: all)")
    parser.add_argument("--as", dest="new_id", metavar="NEW_ID", help="the new session's id")
    parser.add_argument(
        "--agent", metavar="NAME", help="the session's agent (needed only when several use the id)"
    )
    add_place_options(parser)
    add_json_option(parser, "the new session")
    parser.set_defaults(handler=partial(fork_command, find=find, as_row=as_row))


def fork_command(
    args: argparse.Namespace,
    find: Find,
    as_row: Callable[[SessionRecord, str | None], dict[str, Any]],
) -> int:
    import asyncio

    return asyncio.run(_fork(args, find, as_row))


async def _fork(
    args: argparse.Namespace,
    find: Find,
    as_row: Callable[[SessionRecord, str | None], dict[str, Any]],
) -> int:
    from ..runtime.forking import CannotFork, fork
    from ..runtime.titles import titles
    from .runner import opened

    place = place_of(args)
    async with opened(place, {}) as runtime:
        source = await find(runtime, place, args.id, args.agent)
        try:
            key = await fork(runtime, source.key, at=args.at, new_id=args.new_id)
        except CannotFork as exc:
            hint = {
                "seq": f"a seq from 1 to {source.last_seq} (`loopwright sessions show {args.id}`)",
                "exists": "choose another id with --as, or leave it out for a fresh one",
            }.get(exc.why, "see `loopwright sessions fork --help`")
            raise CliError(str(exc), hint=hint) from None
        record = await runtime.session(key)
        [title] = await titles(runtime, [record])
    if opt(args, "json"):
        print_json(as_row(record, title))
        return 0
    print(key.id)
    at = record.forked_from.seq if record.forked_from else record.last_seq
    print(
        f"forked session {source.key.id} at seq {at} as {key.id} ({record.status}); "
        f"see `loopwright sessions show {key.id}`",
        file=sys.stderr,
    )
    return 0
