"""Listing commands print one page: `--limit N` entries (50 by default) from `--cursor C` (the
first page without one), and say on stderr how to read on; `--all` lists everything, a page of
the log at a time."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .common import CliError, opt

if TYPE_CHECKING:
    from ..store.log import Page

LIMIT = 50
ALL_PAGE = 500
"""Entries read at a time with `--all`."""


def add_page_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--limit",
        metavar="N",
        type=_positive,
        default=argparse.SUPPRESS,
        help=f"at most N {what} (default {LIMIT})",
    )
    parser.add_argument(
        "--cursor",
        metavar="CURSOR",
        default=argparse.SUPPRESS,
        help="the next page: the cursor the previous one printed",
    )
    parser.add_argument(
        "--all", action="store_true", default=argparse.SUPPRESS, help=f"every {what}"
    )


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return int(text)


async def pages(
    fetch: Callable[[int, str | None], Awaitable[Page]], args: argparse.Namespace, what: str
) -> AsyncIterator[list[Any]]:
    """The entries of one page (`--limit`, `--cursor`), or of every page (`--all`); after one
    page that is not the last, a line on stderr says how to read on."""
    every = bool(opt(args, "all"))
    limit = ALL_PAGE if every else (opt(args, "limit") or LIMIT)
    cursor: str | None = opt(args, "cursor") or None
    while True:
        try:
            page = await fetch(limit, cursor)
        except (ValueError, OverflowError):
            raise CliError(
                f"--cursor {cursor} is not one loopwright printed",
                hint="use the cursor as it was printed, or leave it out for the first page",
            ) from None
        yield page.items
        if (cursor := page.cursor) is None:
            return
        if not every:
            print(f"more {what}: --cursor {shlex.quote(cursor)} (or --all)", file=sys.stderr)
            return
