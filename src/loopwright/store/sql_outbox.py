"""The notifications' outbox (`store.outbox`), written once for both event logs as programs over
`sql`'s dialect and run by the log whose database holds it: on SQLite on the log's worker thread,
the writes in its write transactions; on PostgreSQL on its pool, each write one transaction (a
webhook's floor locked while it is fanned out, due deliveries claimed `SKIP LOCKED`).
Deliveries are listed by target byte by byte on both ("C" collation on PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from .log import Page
from .outbox import SETTLE, Attempt, AttemptOutcome, Delivery, Notice, delivery_cursor
from .sql import Dialect, Do, Program, Rows, T, iso

EXPAND_BATCH = 500
"""Notices fanned out per statement (a webhook new to a long outbox takes several)."""
DELIVERY = (
    "SELECT d.id, o.id, o.tenant, o.item, o.event, o.at, d.target, d.state, d.attempts, d.due, "
    "d.last_status, d.last_error, d.created_at, d.delivered_at "
    "FROM {deliveries} d JOIN {outbox} o ON o.id = d.notice"
)


class Runs(Protocol):
    """An event log that runs programs (`SQLiteLog`, `PostgresLog`)."""

    def _program(
        self, make: Callable[[Dialect], Program[T]], *, write: bool = False
    ) -> Awaitable[T]: ...


class SQLOutbox:
    """An `Outbox` on the database of `log`."""

    def __init__(self, log: Runs) -> None:
        self.log = log

    async def expand(
        self, target: str, events: Collection[str], now: float, *, max_age: float
    ) -> int:
        return await self.log._program(
            lambda d: expand(d, target, events, now, max_age), write=True
        )

    async def claim(
        self, targets: Collection[str], now: float, *, hold: float, owner: str, limit: int = 20
    ) -> list[Delivery]:
        if not targets:
            return []
        return await self.log._program(
            lambda d: claim(d, targets, now, hold, owner, limit), write=True
        )

    async def record(self, delivery: Delivery, outcome: AttemptOutcome) -> None:
        await self.log._program(lambda d: record(d, delivery, outcome), write=True)

    async def deliveries(
        self,
        tenant: str | None = None,
        *,
        item: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        after = delivery_cursor(cursor) if cursor else None
        return await self.log._program(lambda d: deliveries(d, tenant, item, limit, after))

    async def next_due(self, targets: Collection[str]) -> float | None:
        if not targets:
            return None
        return await self.log._program(lambda d: next_due(d, targets))

    async def notices(self) -> tuple[int, int]:
        return await self.log._program(notices)

    async def expire(self, before: str, error: str, now: float) -> int:
        return await self.log._program(lambda d: expire(d, before, error, now), write=True)

    async def prune(self, before: str) -> int:
        return await self.log._program(lambda d: prune(d, before), write=True)

    async def key(self, name: str, new: str) -> str:
        return await self.log._program(lambda d: key(d, name, new), write=True)


def expand(
    d: Dialect, target: str, events: Collection[str], now: float, max_age: float
) -> Program[int]:
    rows = yield Rows(d("SELECT floor FROM {notify_targets} WHERE target = ?{lock}"), (target,))
    floor = int(rows[0][0]) if rows else 0
    oldest, created, due, after = iso(now - max_age), iso(now), 0, floor
    while True:  # (a batch at a time: a webhook new to a long outbox)
        notices = yield Rows(
            d(
                "SELECT o.id, o.event, o.at FROM {outbox} o WHERE o.id > ? AND NOT EXISTS "
                "(SELECT 1 FROM {deliveries} d WHERE d.notice = o.id AND d.target = ?) "
                "ORDER BY o.id LIMIT ?"
            ),
            (after, target, EXPAND_BATCH),
        )
        made = []
        for notice, event, at in notices:
            state = "due" if event in events and at >= oldest else "skipped"
            due += state == "due"
            made.append((uuid.uuid4().hex, notice, target, state, now, created))
        if made:
            yield Do(
                d(
                    "INSERT INTO {deliveries} (id, notice, target, state, due, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                made,
                many=True,
            )
        if len(notices) < EXPAND_BATCH:
            break
        after = notices[-1][0]
    settled = yield Rows(  # every notice seen is fanned out: the floor moves
        d("SELECT max(id) FROM {outbox} WHERE id > ? AND at < ?"), (floor, iso(now - SETTLE))
    )
    if settled and settled[0][0] is not None:
        yield Do(
            d(
                "INSERT INTO {notify_targets} VALUES (?, ?) ON CONFLICT (target) "
                "DO UPDATE SET floor = excluded.floor"
            ),
            (target, settled[0][0]),
        )
    return due


def claim(
    d: Dialect, targets: Collection[str], now: float, hold: float, owner: str, limit: int
) -> Program[list[Delivery]]:
    rows = yield Rows(
        d(
            f"{DELIVERY} WHERE d.state = 'due' AND d.due <= ? "
            "AND (d.held_until IS NULL OR d.held_until <= ?) AND d.target {in_texts} "
            "ORDER BY d.due, o.id LIMIT ?{skip_locked}"
        ),
        (now, now, d.texts(targets), limit),
    )
    if rows:
        yield Do(
            d("UPDATE {deliveries} SET held_until = ?, held_by = ? WHERE id = ?"),
            [(now + hold, owner, row[0]) for row in rows],
            many=True,
        )
    return [delivery(row) for row in rows]


def record(d: Dialect, delivery: Delivery, outcome: AttemptOutcome) -> Program[None]:
    if outcome.state == "skipped":  # not sent: no attempt
        yield Do(d("UPDATE {deliveries} SET state = 'skipped' WHERE id = ?"), (delivery.id,))
        return
    yield Do(
        d(
            "INSERT INTO {delivery_attempts} VALUES (?, "
            "(SELECT attempts + 1 FROM {deliveries} WHERE id = ?), ?, ?, ?)"
        ),
        (delivery.id, delivery.id, outcome.at, outcome.status, outcome.error),
    )
    yield Do(
        d(
            "UPDATE {deliveries} SET attempts = attempts + 1, state = ?, due = ?, "
            "held_until = NULL, held_by = NULL, last_status = ?, last_error = ?, "
            "delivered_at = ? WHERE id = ?"
        ),
        (
            outcome.state,
            outcome.due if outcome.state == "due" else delivery.due,
            outcome.status,
            outcome.error,
            outcome.at if outcome.state == "delivered" else None,
            delivery.id,
        ),
    )


def deliveries(
    d: Dialect, tenant: str | None, item: str | None, limit: int, after: tuple[int, str] | None
) -> Program[Page]:
    """Newest notice first, then by target (`Outbox.deliveries`); `after`: the cursor's
    (notice, target)."""
    where, params = ["d.state != 'skipped'"], list[Any]()
    for clause, value in (("o.tenant = ?", tenant), ("o.item = ?", item)):
        if value is not None:
            where.append(clause)
            params.append(value)
    if after is not None:
        where.append("(o.id < ? OR (o.id = ? AND d.target{bytes} > ?))")
        params += [after[0], *after]
    rows = yield Rows(
        d(f"{DELIVERY} WHERE {' AND '.join(where)} ORDER BY o.id DESC, d.target{{bytes}} LIMIT ?"),
        (*params, limit + 1),
    )
    tried = yield Rows(
        d(
            "SELECT delivery, n, at, status, error FROM {delivery_attempts} "
            "WHERE delivery {in_texts} ORDER BY delivery, n"
        ),
        (d.texts([row[0] for row in rows[:limit]]),),
    )
    by_id: dict[str, list[Attempt]] = {row[0]: [] for row in rows[:limit]}
    for attempt in tried:
        by_id[attempt[0]].append(Attempt(*attempt[1:]))
    found = [delivery(row, by_id[row[0]]) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(found, None if last is None else f"{last[1]}:{last[6]}")


def next_due(d: Dialect, targets: Collection[str]) -> Program[float | None]:
    rows = yield Rows(
        d(
            "SELECT min({greatest}(due, coalesce(held_until, 0))) FROM {deliveries} "
            "WHERE state = 'due' AND target {in_texts}"
        ),
        (d.texts(targets),),
    )
    return None if rows[0][0] is None else float(rows[0][0])


def notices(d: Dialect) -> Program[tuple[int, int]]:
    rows = yield Rows(d("SELECT count(*), coalesce(max(id), 0) FROM {outbox}"))
    return int(rows[0][0]), int(rows[0][1])


def expire(d: Dialect, before: str, error: str, now: float) -> Program[int]:
    gone = yield Rows(
        d(
            "UPDATE {deliveries} SET state = 'failed', last_error = ? WHERE state = 'due' "
            "AND created_at < ? AND (held_until IS NULL OR held_until <= ?) RETURNING 1"
        ),
        (error, before, now),
    )
    return len(gone)


def prune(d: Dialect, before: str) -> Program[int]:
    """The newest notice is always kept: SQLite gives a new row the highest id + 1, and an id
    taken again would sit below the webhooks' floors (never fanned out)."""
    yield Do(
        d(
            "DELETE FROM {delivery_attempts} WHERE delivery IN (SELECT id FROM {deliveries} "
            "WHERE state != 'due' AND created_at < ?)"
        ),
        (before,),
    )
    gone = yield Rows(
        d("DELETE FROM {deliveries} WHERE state != 'due' AND created_at < ? RETURNING 1"),
        (before,),
    )
    yield Do(
        d(
            "DELETE FROM {outbox} WHERE at < ? AND NOT EXISTS (SELECT 1 FROM {deliveries} d "
            "WHERE d.notice = {outbox}.id AND d.state = 'due') "
            "AND id < (SELECT max(id) FROM {outbox})"
        ),
        (before,),
    )
    return len(gone)


def key(d: Dialect, name: str, new: str) -> Program[str]:
    yield Do(d("INSERT INTO {notify_keys} VALUES (?, ?) ON CONFLICT DO NOTHING"), (name, new))
    rows = yield Rows(d("SELECT value FROM {notify_keys} WHERE name = ?"), (name,))
    return str(rows[0][0])


def delivery(row: Sequence[Any], tried: list[Attempt] | None = None) -> Delivery:
    """A row of `DELIVERY`."""
    return Delivery(
        row[0],
        Notice(row[1], row[2], row[3], row[4], row[5]),
        row[6],
        row[7],
        row[8],
        float(row[9]),
        last_status=row[10],
        last_error=row[11],
        created_at=row[12],
        delivered_at=row[13],
        tried=tried or [],
    )
