"""The PostgreSQL event log's statements: what runs on one pooled connection, most of it inside
the transaction of a write. A writer locks its session's row (`FOR UPDATE`) first: writes to one
session serialise on that lock, which keeps its seqs gapless and checks its lease's epoch before
anything is written. The database's clock comes along with the row (`NOW`), for a log that
judges leases by it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from .. import events as ev
from ..errors import SessionBusy
from . import blobs
from .derive import SessionRow, derive
from .log import Claimed, Lease, SessionKey, encoded
from .records import StaleWriter
from .sql import POSTGRES, Do, Program, T, astuple, derived_rows, iso, unknown

Db = AsyncConnection[TupleRow]

NOW = POSTGRES.words["now"]
"""The database's clock, Unix seconds."""
BY_KEY = "tenant = %s AND agent = %s AND name = %s"


async def one(db: Db, query: str, params: Sequence[Any] = ()) -> TupleRow | None:
    return await (await db.execute(query, params)).fetchone()


async def session_id(db: Db, key: SessionKey) -> int:
    row = await one(db, f"SELECT id FROM loopwright_sessions WHERE {BY_KEY}", astuple(key))
    if row is None:
        raise unknown(key)
    return int(row[0])


async def locked(db: Db, sid: int) -> tuple[SessionRow, float]:
    """The session's state, its row locked until the transaction ends; and the database's clock."""
    row = await one(
        db,
        f"SELECT last_seq, last_reply_seq, status, {NOW} FROM loopwright_sessions "
        "WHERE id = %s FOR UPDATE",
        (sid,),
    )
    assert row is not None
    return SessionRow(row[0], row[1], row[2]), row[3]


async def fence(db: Db, lease: Lease) -> tuple[int, SessionRow, float]:
    """The session's key and state, if `lease` still holds it (its row locked), and the
    database's clock; `StaleWriter` otherwise."""
    row = await one(
        db,
        f"SELECT id, epoch, owner, last_seq, last_reply_seq, status, {NOW} "
        f"FROM loopwright_sessions WHERE {BY_KEY} FOR UPDATE",
        astuple(lease.key),
    )
    if row is None:
        raise unknown(lease.key)
    sid, epoch, owner, last_seq, last_reply_seq, status, now = row
    if epoch != lease.epoch or owner is None:
        how = "was released" if epoch == lease.epoch else f"was taken over (epoch {epoch})"
        raise StaleWriter(f"session {lease.key.id}: this run's lease (epoch {lease.epoch}) {how}")
    return sid, SessionRow(last_seq, last_reply_seq, status), now


async def claim(
    db: Db,
    key: SessionKey,
    owner: str,
    ttl: float,
    parent: SessionKey | None,
    clock: Callable[[float], float],
) -> Claimed:
    """Take the session for a run (see `EventLog.claim`); `clock` makes the database's clock
    the log's."""
    select = (
        f"SELECT id, status, epoch, owner, lease_expires, last_seq, {NOW} "
        f"FROM loopwright_sessions WHERE {BY_KEY} FOR UPDATE"
    )
    row = await one(db, select, astuple(key))
    if row is None:
        if parent is not None and parent.tenant != key.tenant:
            raise unknown(parent)
        parent_id = None if parent is None else await session_id(db, parent)
        row = await one(db, f"SELECT {NOW}")
        assert row is not None
        now = clock(row[0])
        created = await one(
            db,
            "INSERT INTO loopwright_sessions (tenant, agent, name, parent, status, epoch, "
            "owner, lease_expires, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, 'running', 1, %s, %s, %s, %s) "
            "ON CONFLICT (tenant, agent, name) DO NOTHING RETURNING id",
            (*astuple(key), parent_id, owner, now + ttl, *[iso(now)] * 2),
        )
        if created is not None:
            return Claimed(Lease(key, owner, 1, now + ttl), False, 0)
        # another process created it meanwhile (and committed): take it as it stands
        row = await one(db, select, astuple(key))
        assert row is not None
    sid, status, epoch, holder, expires, last_seq, db_now = row
    now = clock(db_now)
    if holder is not None and expires is not None and expires > now:
        raise SessionBusy(f"session {key.id} is held by another run until {iso(expires)}")
    await db.execute(POSTGRES.take_over, (epoch + 1, owner, now + ttl, iso(now), sid))
    died = status in ("running", "interrupted")
    return Claimed(Lease(key, owner, epoch + 1, now + ttl), died, last_seq)


async def commit(
    db: Db,
    sid: int,
    tenant: str,
    state: SessionRow,
    events: Sequence[ev.Event],
    at: str,
) -> int:
    """Append `events` after `state` with what they derive; returns the last seq."""
    derived = derive(state, events)
    if events:
        await db.cursor().executemany(
            POSTGRES.insert_events,
            [
                (sid, seq, e.type, text, at)
                for seq, (e, text) in enumerate(
                    zip(events, encoded(events), strict=True), state.last_seq + 1
                )
            ],
        )
        found = blobs.rows(events, at)  # their bytes, once per hash
        if found:
            await db.cursor().executemany(POSTGRES.insert_blob, found)
    if derived.ops:
        for step in derived_rows(POSTGRES, derived.ops, sid, tenant, at):
            await db.execute(step.text, step.params)
    new = derived.state
    await db.execute(POSTGRES.advance, (new.last_seq, new.last_reply_seq, new.status, at, sid))
    return new.last_seq


async def run(db: Db, program: Program[T]) -> T:
    """Run a program (`sql`) on the connection, awaiting each statement."""
    rows: Any = None
    while True:
        try:
            step = program.send(rows)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]
        if not isinstance(step, Do):
            rows = await (await db.execute(step.text, step.params)).fetchall()
        elif step.many:
            await db.cursor().executemany(step.text, step.params)
            rows = None
        else:
            await db.execute(step.text, step.params)
            rows = None
