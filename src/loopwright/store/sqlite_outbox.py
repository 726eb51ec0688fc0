"""The notifications' outbox on the SQLite event log (see `store.outbox`): its statements run on
the log's worker thread, the writes in its write transactions."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from .log import Page
from .outbox import SETTLE, Attempt, Delivery, Notice, Outcome, delivery_cursor
from .sqlite_rows import iso

if TYPE_CHECKING:
    from .sqlite_log import SQLiteLog

EXPAND_BATCH = 500
DELIVERY = (
    "d.id, o.id, o.tenant, o.item, o.event, o.at, d.target, d.state, d.attempts, d.due, "
    "d.last_status, d.last_error, d.created_at, d.delivered_at "
    "FROM deliveries d JOIN outbox o ON o.id = d.notice"
)


def delivery(row: Sequence[Any], tried: list[Attempt] | None = None) -> Delivery:
    """A row of `DELIVERY` (the PostgreSQL outbox's has the same columns)."""
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


def listed(rows: Sequence[Sequence[Any]], tried: Sequence[Sequence[Any]], limit: int) -> Page:
    """`deliveries`' page: the first `limit` of `rows` (of `DELIVERY`, `limit + 1` read) with
    their attempts (`tried`: rows of delivery id, n, at, status, error, by n), and the cursor
    after the last one when there are more."""
    by_id: dict[str, list[Attempt]] = {row[0]: [] for row in rows[:limit]}
    for attempt in tried:
        by_id[attempt[0]].append(Attempt(*attempt[1:]))
    found = [delivery(row, by_id[row[0]]) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(found, None if last is None else f"{last[1]}:{last[6]}")


PRUNE = (
    "DELETE FROM delivery_attempts WHERE delivery IN (SELECT id FROM deliveries "
    "WHERE state != 'due' AND created_at < ?)",
    "DELETE FROM deliveries WHERE state != 'due' AND created_at < ?",
    "DELETE FROM outbox WHERE at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d "
    "WHERE d.notice = outbox.id AND d.state = 'due') AND id < (SELECT max(id) FROM outbox)",
)
"""`prune`'s statements, in order (the PostgreSQL outbox names its tables so). The newest
notice is always kept: SQLite gives a new row the highest id + 1, and an id taken again would
sit below the webhooks' floors (never fanned out)."""


def _marks(values: Collection[Any]) -> str:
    return ", ".join("?" for _ in values)


class SQLiteOutbox:
    """An `Outbox` on a `SQLiteLog`'s file."""

    def __init__(self, log: SQLiteLog) -> None:
        self.log = log

    async def expand(
        self, target: str, events: Collection[str], now: float, *, max_age: float
    ) -> int:
        def job(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT floor FROM notify_targets WHERE target=?", (target,))
            floor = (row.fetchone() or (0,))[0]
            oldest, created, due, after = iso(now - max_age), iso(now), 0, floor
            while True:  # (a batch at a time: a webhook new to a long outbox)
                notices = db.execute(
                    "SELECT o.id, o.event, o.at FROM outbox o WHERE o.id > ? AND NOT EXISTS "
                    "(SELECT 1 FROM deliveries d WHERE d.notice = o.id AND d.target = ?) "
                    "ORDER BY o.id LIMIT ?",
                    (after, target, EXPAND_BATCH),
                ).fetchall()
                for notice, event, at in notices:
                    state = "due" if event in events and at >= oldest else "skipped"
                    due += state == "due"
                    db.execute(
                        "INSERT INTO deliveries (id, notice, target, state, due, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (uuid.uuid4().hex, notice, target, state, now, created),
                    )
                if len(notices) < EXPAND_BATCH:
                    break
                after = notices[-1][0]
            settled = db.execute(  # every notice seen is fanned out: the floor moves
                "SELECT max(id) FROM outbox WHERE id > ? AND at < ?", (floor, iso(now - SETTLE))
            ).fetchone()[0]
            if settled is not None:
                db.execute(
                    "INSERT INTO notify_targets VALUES (?, ?) ON CONFLICT (target) "
                    "DO UPDATE SET floor = excluded.floor",
                    (target, settled),
                )
            return due

        return await self.log._call(job, write=True)

    async def claim(
        self, targets: Collection[str], now: float, *, hold: float, owner: str, limit: int = 20
    ) -> list[Delivery]:
        if not targets:
            return []

        def job(db: sqlite3.Connection) -> list[Delivery]:
            rows = db.execute(
                f"SELECT {DELIVERY} WHERE d.state = 'due' AND d.due <= ? "
                f"AND (d.held_until IS NULL OR d.held_until <= ?) "
                f"AND d.target IN ({_marks(targets)}) ORDER BY d.due, o.id LIMIT ?",
                (now, now, *targets, limit),
            ).fetchall()
            db.executemany(
                "UPDATE deliveries SET held_until = ?, held_by = ? WHERE id = ?",
                [(now + hold, owner, row[0]) for row in rows],
            )
            return [delivery(row) for row in rows]

        return await self.log._call(job, write=True)

    async def record(self, delivery: Delivery, outcome: Outcome) -> None:
        def job(db: sqlite3.Connection) -> None:
            if outcome.state == "skipped":  # not sent: no attempt
                db.execute("UPDATE deliveries SET state = 'skipped' WHERE id = ?", (delivery.id,))
                return
            db.execute(
                "INSERT INTO delivery_attempts VALUES (?, "
                "(SELECT attempts + 1 FROM deliveries WHERE id = ?), ?, ?, ?)",
                (delivery.id, delivery.id, outcome.at, outcome.status, outcome.error),
            )
            db.execute(
                "UPDATE deliveries SET attempts = attempts + 1, state = ?, due = ?, "
                "held_until = NULL, held_by = NULL, last_status = ?, last_error = ?, "
                "delivered_at = ? WHERE id = ?",
                (
                    outcome.state,
                    outcome.due if outcome.state == "due" else delivery.due,
                    outcome.status,
                    outcome.error,
                    outcome.at if outcome.state == "delivered" else None,
                    delivery.id,
                ),
            )

        await self.log._call(job, write=True)

    async def deliveries(
        self,
        tenant: str | None = None,
        *,
        item: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        notice, target = delivery_cursor(cursor) if cursor else (None, "")

        def job(db: sqlite3.Connection) -> Page:
            rows = db.execute(
                f"SELECT {DELIVERY} WHERE d.state != 'skipped' "
                "AND (?1 IS NULL OR o.tenant = ?1) AND (?2 IS NULL OR o.item = ?2) "
                "AND (?3 IS NULL OR o.id < ?3 OR (o.id = ?3 AND d.target > ?4)) "
                "ORDER BY o.id DESC, d.target LIMIT ?5",
                (tenant, item, notice, target, limit + 1),
            ).fetchall()
            ids = [row[0] for row in rows[:limit]]
            tried = db.execute(
                "SELECT delivery, n, at, status, error FROM delivery_attempts "
                "WHERE delivery IN (SELECT value FROM json_each(?)) ORDER BY delivery, n",
                (json.dumps(ids),),
            ).fetchall()
            return listed(rows, tried, limit)

        return await self.log._call(job)

    async def next_due(self, targets: Collection[str]) -> float | None:
        if not targets:
            return None

        def job(db: sqlite3.Connection) -> float | None:
            row = db.execute(
                "SELECT min(max(due, coalesce(held_until, 0))) FROM deliveries "
                f"WHERE state = 'due' AND target IN ({_marks(targets)})",
                tuple(targets),
            ).fetchone()
            return None if row[0] is None else float(row[0])

        return await self.log._call(job)

    async def notices(self) -> tuple[int, int]:
        def job(db: sqlite3.Connection) -> tuple[int, int]:
            count, last = db.execute("SELECT count(*), coalesce(max(id), 0) FROM outbox").fetchone()
            return int(count), int(last)

        return await self.log._call(job)

    async def prune(self, before: str) -> int:
        def job(db: sqlite3.Connection) -> int:
            attempts, deliveries, notices = PRUNE
            db.execute(attempts, (before,))
            gone = db.execute(deliveries, (before,)).rowcount
            db.execute(notices, (before,))
            return int(gone)

        return await self.log._call(job, write=True)

    async def key(self, name: str, new: str) -> str:
        def job(db: sqlite3.Connection) -> str:
            db.execute("INSERT INTO notify_keys VALUES (?, ?) ON CONFLICT DO NOTHING", (name, new))
            return str(
                db.execute("SELECT value FROM notify_keys WHERE name = ?", (name,)).fetchone()[0]
            )

        return await self.log._call(job, write=True)
