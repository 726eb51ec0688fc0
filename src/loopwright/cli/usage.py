"""`loopwright usage`: the project's model usage (requests, tokens, cost) summed by agent,
session, day or model, read from the event log's usage rows (`store.usage_report`)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..store.usage import GROUPS
from .common import (
    CliError,
    Place,
    add_json_option,
    add_place_options,
    opt,
    place_of,
    print_json,
    table,
)
from .pages import add_page_options, pages

if TYPE_CHECKING:
    from ..store.log import Page
    from ..store.usage_report import UsageQuery


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    usage = commands.add_parser(
        "usage",
        help="model requests, tokens and cost, summed",
        description="The tenant's model usage from the stored sessions: requests, tokens and "
        "cost, in total or grouped with --by (agent, session, day, model; comma-separated). "
        "A cost is known only for models with a price; requests without one are counted.",
    )
    usage.add_argument(
        "--by", metavar="GROUPS", default="", help=f"group by any of {', '.join(GROUPS)}"
    )
    usage.add_argument("--agent", metavar="NAME", help="only this agent's sessions")
    usage.add_argument(
        "--session", metavar="ID", help="only this session and its subagents' (needs --agent)"
    )
    usage.add_argument("--from", dest="since", metavar="DAY", help="from this day (YYYY-MM-DD)")
    usage.add_argument("--to", dest="until", metavar="DAY", help="up to this day (YYYY-MM-DD)")
    add_place_options(usage)
    add_json_option(usage, "one group per line")
    add_page_options(usage, "groups")
    usage.set_defaults(handler=usage_command)


def usage_command(args: argparse.Namespace) -> int:
    import asyncio

    from ..store.usage_report import UsageQuery, groups

    place = place_of(args)
    try:
        query = UsageQuery(
            tenant=place.tenant,
            by=groups(args.by),
            agent=args.agent,
            session=args.session,
            since=args.since,
            until=args.until,
        )
    except ValueError as exc:
        raise CliError(
            str(exc), hint=f"--by takes {', '.join(GROUPS)}; days are YYYY-MM-DD"
        ) from None
    return asyncio.run(_report(place, args, query))


async def _report(place: Place, args: argparse.Namespace, query: UsageQuery) -> int:
    from ..store.usage import cost_text
    from .runner import opened

    groups = []
    by = query.by
    async with opened(place, {}) as runtime:

        def fetch(limit: int, cursor: str | None) -> Awaitable[Page]:
            return runtime.usage_report(replace(query, limit=min(limit, 1000), cursor=cursor))

        async for page in pages(fetch, args, "groups"):
            for group in page:
                if opt(args, "json"):
                    print_json(group)
                else:
                    groups.append(group)
    if opt(args, "json"):
        return 0
    headers = [g.upper() for g in by] + ["REQUESTS", "IN", "OUT", "CACHE READ", "CACHE WRITE"]
    rows = [
        [str(g[k] if g[k] is not None else "-") for k in by]
        + [f"{g[k]:,}" for k in ("requests", "input_tokens", "output_tokens")]
        + [f"{g[k]:,}" for k in ("cache_read_tokens", "cache_write_tokens")]
        + [cost_text(g["cost"], g["unpriced"]) if g["requests"] else "$0"]
        for g in groups
    ]
    print(table([*headers, "COST"], rows))
    return 0
