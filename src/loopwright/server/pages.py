"""Pages: no listing and no event read answers more than one page.

Listings take `?limit=N` (1 to `MAX_PAGE`, `PAGE` by default) and `?cursor=C`, and answer
`nextCursor`: the `cursor` of the next page, or null at the end. A page may hold fewer than
`limit` entries (what the log listed but the route leaves out, such as subagents' sessions,
still moves the cursor): only a null `nextCursor` says there is nothing more. A cursor is the
event log's own position, opaque to clients (base64url); one the server did not give is a 400.

Event reads take `?after=SEQ` and `?limit=N` (1 to `MAX_EVENTS`, `EVENTS` by default) and
answer `nextAfter` (the seq of the last event read: the `after` of the next read) and `more`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request

from ..store.log import Page
from .views import ApiError

PAGE = 100
MAX_PAGE = 1000
EVENTS = 500
MAX_EVENTS = 5000
ROUNDS = 8
"""Log pages one listing page reads at most (the rest is the next page's work)."""

T = TypeVar("T")


def limit_of(request: Request, default: int = PAGE, maximum: int = MAX_PAGE) -> int:
    text = request.query_params.get("limit")
    if text is None:
        return default
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or not 1 <= int(text) <= maximum:
        raise ApiError(400, f"limit must be an integer from 1 to {maximum}")
    return int(text)


def cursor_of(request: Request) -> str | None:
    """The log's cursor given as `?cursor=` (None: the first page)."""
    text = request.query_params.get("cursor")
    if text is None or text == "":
        return None
    try:
        if len(text) > 400:
            raise ValueError
        cursor = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        if not cursor.isprintable() or encode(cursor) != text:
            raise ValueError
    except (ValueError, binascii.Error):
        raise ApiError(
            400, "cursor is not one this server gave (use nextCursor as it is)"
        ) from None
    return cursor


def encode(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    return base64.urlsafe_b64encode(cursor.encode()).decode("ascii").rstrip("=")


async def collect(
    fetch: Callable[[int, str | None], Awaitable[tuple[list[T], str | None]]],
    limit: int,
    cursor: str | None,
) -> tuple[list[T], str | None]:
    """Up to `limit` entries from `fetch(n, cursor)` (the entries of a log page of at most `n`
    it keeps, and the log's next cursor), in at most `ROUNDS` log pages; and the next cursor,
    encoded for the client (None at the end). A cursor the log refuses is a 400."""
    out: list[T] = []
    for _ in range(ROUNDS):
        try:
            items, cursor = await fetch(limit - len(out), cursor)
        except (ValueError, OverflowError):  # a cursor made up to look like one of ours
            raise ApiError(400, "cursor is not one this server gave") from None
        out += items
        if cursor is None or len(out) >= limit:
            break
    return out, encode(cursor)


def page_body(key: str, entries: list[Any], cursor: str | None) -> dict[str, Any]:
    return {key: entries, "nextCursor": cursor}


def kept(page: Page, keep: Callable[[Any], bool]) -> tuple[list[Any], str | None]:
    return [item for item in page.items if keep(item)], page.cursor
