"""Usage reports: the stored per-request usage rows, summed by agent, session, day or model.

One query for both backends, over `sql`'s dialect. A report is filtered by tenant (always),
agent, session (the session and its subagents' sessions) and a day range, grouped by any of
`GROUPS`, ordered by the group's key and paged by that key (keyset: a cursor is the last group's
key, so rows added meanwhile never shift a page).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .records import Page
from .sql import Dialect, Program, Rows
from .usage import GROUPS as GROUPS

"""What a report may be grouped by, in the order the keys appear in each group."""
# each group: its keys, then the sums (`cost` is null when no request of the group had a
# price; `unpriced` counts the requests without one, so a partial cost is never silent)
_KEY = {
    "agent": "s.agent",
    "session": "s.name",
    "day": "substr(u.at, 1, 10)",
    "model": "coalesce(u.model, '')",
}
TOTALS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
    "unpriced",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageQuery:
    """Which rows, grouped how. `since`/`until` are days (`YYYY-MM-DD`, inclusive, UTC)."""

    tenant: str
    by: tuple[str, ...] = ()
    agent: str | None = None
    session: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = 100
    cursor: str | None = None

    def __post_init__(self) -> None:
        unknown = [g for g in self.by if g not in GROUPS]
        if unknown or len(set(self.by)) != len(self.by):
            raise ValueError(f"group by any of {', '.join(GROUPS)}, each once (got {self.by})")
        if self.session is not None and self.agent is None:
            raise ValueError("a session is named with its agent")
        for day in (self.since, self.until):
            if day is not None and not _is_day(day):
                raise ValueError(f"{day!r} is not a day (YYYY-MM-DD)")
        if not 1 <= self.limit <= 1000:
            raise ValueError("limit must be between 1 and 1000")


def groups(text: str) -> tuple[str, ...]:
    """The groups of a comma-separated `by` (`"agent, day"`), as given: the query checks them."""
    return tuple(g.strip() for g in text.split(",") if g.strip())


def statement(q: UsageQuery, d: Dialect) -> tuple[str, list[Any]]:
    """The SQL and its parameters for one page (one row more than the limit: is there more)."""
    where, params = ["u.tenant = ?"], list[Any]([q.tenant])
    tree = ""
    if q.session is not None:  # the session and the subagent sessions under it
        tree = (
            "WITH RECURSIVE tree(id) AS (SELECT id FROM {sessions} WHERE tenant = ? AND "
            "agent = ? AND name = ? UNION ALL SELECT c.id FROM {sessions} c JOIN tree "
            "ON c.parent = tree.id) "
        )
        params = [q.tenant, q.agent, q.session, *params]
        where.append("u.session IN (SELECT id FROM tree)")
    elif q.agent is not None:
        where.append("s.agent = ?")
        params.append(q.agent)
    if q.since is not None:
        where.append("substr(u.at, 1, 10) >= ?")
        params.append(q.since)
    if q.until is not None:
        where.append("substr(u.at, 1, 10) <= ?")
        params.append(q.until)
    keys = [_KEY[g] for g in q.by]
    if q.cursor is not None and keys:  # a group's rows share its key: filter rows by it
        where.append(f"({', '.join(keys)}) > ({', '.join('?' * len(keys))})")
        params.extend(decode(q.cursor, len(keys)))
    group = f" GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)}" if keys else ""
    sums = ", ".join(
        f"coalesce(sum(u.{c}), 0){{bigint}}"
        for c in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    )
    text = (
        f"{tree}SELECT {''.join(k + ', ' for k in keys)}count(*), {sums}, sum(u.cost), "
        "count(*) - count(u.cost) FROM {usage} u JOIN {sessions} s ON s.id = u.session "
        f"WHERE {' AND '.join(where)}{group} LIMIT {q.limit + 1}"
    )
    return d(text), params


def report(d: Dialect, q: UsageQuery) -> Program[Page]:
    """The page of `q` (`page`), run by a backend (`sql`)."""
    return page(q, (yield Rows(*statement(q, d))))


def page(q: UsageQuery, rows: Sequence[Sequence[Any]]) -> Page:
    """The page of groups (each its keys, then the sums) and the cursor of the next one."""
    n = len(q.by)
    groups = []
    for row in rows[: q.limit]:
        group: dict[str, Any] = dict(zip(q.by, row[:n], strict=True))
        if "model" in group:
            group["model"] = group["model"] or None
        group.update(zip(TOTALS, row[n:], strict=True))
        groups.append(group)
    more = len(rows) > q.limit and n > 0
    return Page(groups, encode([str(v) for v in rows[q.limit - 1][:n]]) if more else None)


def encode(key: list[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def decode(cursor: str, n: int) -> list[str]:
    """The key a cursor holds; `ValueError` for one this log did not give."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise ValueError(f"cursor {cursor!r} is not one this log gave") from None
    if not (isinstance(key, list) and len(key) == n and all(isinstance(k, str) for k in key)):
        raise ValueError(f"cursor {cursor!r} is not one this log gave")
    return key


def _is_day(text: str) -> bool:
    parts = text.split("-")
    return (
        len(text) == 10
        and [len(p) for p in parts] == [4, 2, 2]
        and all(p.isascii() and p.isdigit() for p in parts)
    )
