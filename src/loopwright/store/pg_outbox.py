"""The notifications' outbox on the PostgreSQL event log (see `store.outbox`): the same
statements as on SQLite (`sqlite_outbox`), on the log's pool, the writes in one transaction.
Deliveries are listed by target in the "C" collation (byte order), as SQLite compares them, so
that both page alike whatever the database's collation."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import TYPE_CHECKING

from .log import Page
from .outbox import SETTLE, Delivery, Outcome, delivery_cursor
from .pg_rows import Db, iso
from .sqlite_outbox import DELIVERY, EXPAND_BATCH, PRUNE, delivery, listed

if TYPE_CHECKING:
    from .pg_log import PostgresLog

_PRUNE = [
    statement.replace("?", "%s")
    .replace("delivery_attempts", "loopwright_delivery_attempts")
    .replace("FROM deliveries", "FROM loopwright_deliveries")
    .replace("FROM outbox", "FROM loopwright_outbox")
    .replace("outbox.id", "loopwright_outbox.id")
    for statement in PRUNE
]
_DELIVERY = DELIVERY.replace("deliveries d", "loopwright_deliveries d").replace(
    "outbox o", "loopwright_outbox o"
)


class PostgresOutbox:
    """An `Outbox` on a `PostgresLog`'s schema."""

    def __init__(self, log: PostgresLog) -> None:
        self.log = log

    async def expand(
        self, target: str, events: Collection[str], now: float, *, max_age: float
    ) -> int:
        async def job(db: Db) -> int:
            row = await (
                await db.execute(
                    "SELECT floor FROM loopwright_notify_targets WHERE target = %s FOR UPDATE",
                    (target,),
                )
            ).fetchone()
            floor = 0 if row is None else int(row[0])
            oldest, created, due, after = iso(now - max_age), iso(now), 0, floor
            while True:  # (a batch at a time: a webhook new to a long outbox)
                notices = await (
                    await db.execute(
                        "SELECT o.id, o.event, o.at FROM loopwright_outbox o WHERE o.id > %s "
                        "AND NOT EXISTS (SELECT 1 FROM loopwright_deliveries d "
                        "WHERE d.notice = o.id AND d.target = %s) ORDER BY o.id LIMIT %s",
                        (after, target, EXPAND_BATCH),
                    )
                ).fetchall()
                for notice, event, at in notices:
                    state = "due" if event in events and at >= oldest else "skipped"
                    due += state == "due"
                    await db.execute(
                        "INSERT INTO loopwright_deliveries (id, notice, target, state, due, "
                        "created_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (uuid.uuid4().hex, notice, target, state, now, created),
                    )
                if len(notices) < EXPAND_BATCH:
                    break
                after = notices[-1][0]
            settled = await (
                await db.execute(
                    "SELECT max(id) FROM loopwright_outbox WHERE id > %s AND at < %s",
                    (floor, iso(now - SETTLE)),
                )
            ).fetchone()
            if settled is not None and settled[0] is not None:
                await db.execute(
                    "INSERT INTO loopwright_notify_targets VALUES (%s, %s) ON CONFLICT "
                    "(target) DO UPDATE SET floor = excluded.floor",
                    (target, settled[0]),
                )
            return due

        return await self.log._run(job, write=True)

    async def claim(
        self, targets: Collection[str], now: float, *, hold: float, owner: str, limit: int = 20
    ) -> list[Delivery]:
        if not targets:
            return []

        async def job(db: Db) -> list[Delivery]:
            rows = await (
                await db.execute(
                    f"SELECT {_DELIVERY} WHERE d.state = 'due' AND d.due <= %s "
                    "AND (d.held_until IS NULL OR d.held_until <= %s) "
                    "AND d.target = ANY(%s) ORDER BY d.due, o.id LIMIT %s FOR UPDATE OF d "
                    "SKIP LOCKED",
                    (now, now, list(targets), limit),
                )
            ).fetchall()
            for row in rows:
                await db.execute(
                    "UPDATE loopwright_deliveries SET held_until = %s, held_by = %s WHERE id = %s",
                    (now + hold, owner, row[0]),
                )
            return [delivery(row) for row in rows]

        return await self.log._run(job, write=True)

    async def record(self, delivery: Delivery, outcome: Outcome) -> None:
        async def job(db: Db) -> None:
            if outcome.state == "skipped":  # not sent: no attempt
                await db.execute(
                    "UPDATE loopwright_deliveries SET state = 'skipped' WHERE id = %s",
                    (delivery.id,),
                )
                return
            await db.execute(
                "INSERT INTO loopwright_delivery_attempts VALUES (%s, "
                "(SELECT attempts + 1 FROM loopwright_deliveries WHERE id = %s), %s, %s, %s)",
                (delivery.id, delivery.id, outcome.at, outcome.status, outcome.error),
            )
            await db.execute(
                "UPDATE loopwright_deliveries SET attempts = attempts + 1, state = %s, "
                "due = %s, held_until = NULL, held_by = NULL, last_status = %s, "
                "last_error = %s, delivered_at = %s WHERE id = %s",
                (
                    outcome.state,
                    outcome.due if outcome.state == "due" else delivery.due,
                    outcome.status,
                    outcome.error,
                    outcome.at if outcome.state == "delivered" else None,
                    delivery.id,
                ),
            )

        await self.log._run(job, write=True)

    async def deliveries(
        self,
        tenant: str | None = None,
        *,
        item: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        notice, target = delivery_cursor(cursor) if cursor else (None, "")

        async def job(db: Db) -> Page:
            rows = await (
                await db.execute(
                    f"SELECT {_DELIVERY} WHERE d.state != 'skipped' "
                    "AND (%(tenant)s::text IS NULL OR o.tenant = %(tenant)s) "
                    "AND (%(item)s::text IS NULL OR o.item = %(item)s) "
                    "AND (%(notice)s::bigint IS NULL OR o.id < %(notice)s "
                    'OR (o.id = %(notice)s AND d.target COLLATE "C" > %(target)s)) '
                    'ORDER BY o.id DESC, d.target COLLATE "C" LIMIT %(limit)s',
                    {
                        "tenant": tenant,
                        "item": item,
                        "notice": notice,
                        "target": target,
                        "limit": limit + 1,
                    },
                )
            ).fetchall()
            tried = await (
                await db.execute(
                    "SELECT delivery, n, at, status, error FROM loopwright_delivery_attempts "
                    "WHERE delivery = ANY(%s) ORDER BY delivery, n",
                    ([row[0] for row in rows[:limit]],),
                )
            ).fetchall()
            return listed(rows, tried, limit)

        return await self.log._run(job)

    async def next_due(self, targets: Collection[str]) -> float | None:
        if not targets:
            return None

        async def job(db: Db) -> float | None:
            row = await (
                await db.execute(
                    "SELECT min(greatest(due, coalesce(held_until, 0))) "
                    "FROM loopwright_deliveries WHERE state = 'due' AND target = ANY(%s)",
                    (list(targets),),
                )
            ).fetchone()
            return None if row is None or row[0] is None else float(row[0])

        return await self.log._run(job)

    async def notices(self) -> tuple[int, int]:
        async def job(db: Db) -> tuple[int, int]:
            row = await (
                await db.execute("SELECT count(*), coalesce(max(id), 0) FROM loopwright_outbox")
            ).fetchone()
            assert row is not None
            return int(row[0]), int(row[1])

        return await self.log._run(job)

    async def prune(self, before: str) -> int:
        async def job(db: Db) -> int:
            attempts, deliveries, notices = _PRUNE
            await db.execute(attempts, (before,))
            counted = f"WITH gone AS ({deliveries} RETURNING 1) SELECT count(*) FROM gone"
            gone = await (await db.execute(counted, (before,))).fetchone()
            await db.execute(notices, (before,))
            return 0 if gone is None else int(gone[0])

        return await self.log._run(job, write=True)

    async def key(self, name: str, new: str) -> str:
        async def job(db: Db) -> str:
            await db.execute(
                "INSERT INTO loopwright_notify_keys VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (name, new),
            )
            row = await (
                await db.execute(
                    "SELECT value FROM loopwright_notify_keys WHERE name = %s", (name,)
                )
            ).fetchone()
            assert row is not None
            return str(row[0])

        return await self.log._run(job, write=True)
