"""The PostgreSQL event log's statements: what runs on one pooled connection, most of it inside
the transaction of a write. A writer locks its session's row (`FOR UPDATE`) first: writes to one
session serialise on that lock, which keeps its seqs gapless and checks its lease's epoch before
anything is written. The database's clock comes along with the row (`NOW`), for a log that
judges leases by it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from .. import events as ev
from .. import redact
from ..errors import SessionBusy, UnknownPending, UnknownSession
from ..wire import dumps
from . import PendingRecord, StaleWriter, blobs
from .derive import DecidePending, NewPending, NewUsage, SessionState, SetCallId, derive
from .log import Claimed, Lease, SessionKey
from .records import pending_record

Db = AsyncConnection[TupleRow]

NOW = "extract(epoch FROM clock_timestamp())::float8"
"""The database's clock, Unix seconds."""
PENDING = (
    "p.id, s.name, s.tenant, s.agent, p.kind, p.call_id, p.tool, p.args, p.reason, "
    "p.requested_at, p.batch_seq, p.status, p.decided_by, p.decided_at, p.edited_args, "
    "p.answer, p.note FROM loopwright_pending p JOIN loopwright_sessions s ON s.id = p.session"
)
SESSION = (
    "s.tenant, s.agent, s.name, s.status, s.last_seq, s.created_at, s.updated_at, s.owner, "
    f"s.lease_expires, p.tenant, p.agent, p.name, s.id, {NOW} "
    "FROM loopwright_sessions s LEFT JOIN loopwright_sessions p ON p.id = s.parent"
)
USAGE = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
)
BY_KEY = "tenant = %s AND agent = %s AND name = %s"


async def one(db: Db, query: str, params: Sequence[Any] = ()) -> TupleRow | None:
    return await (await db.execute(query, params)).fetchone()


async def session_id(db: Db, key: SessionKey) -> int:
    row = await one(db, f"SELECT id FROM loopwright_sessions WHERE {BY_KEY}", astuple(key))
    if row is None:
        raise unknown(key)
    return int(row[0])


def astuple(key: SessionKey) -> tuple[str, str, str]:
    return key.tenant, key.agent, key.id


def unknown(key: SessionKey) -> UnknownSession:
    return UnknownSession(f"no session {key.id!r}")


async def locked(db: Db, sid: int) -> tuple[SessionState, float]:
    """The session's state, its row locked until the transaction ends; and the database's clock."""
    row = await one(
        db,
        f"SELECT last_seq, last_reply_seq, status, {NOW} FROM loopwright_sessions "
        "WHERE id = %s FOR UPDATE",
        (sid,),
    )
    assert row is not None
    return SessionState(row[0], row[1], row[2]), row[3]


async def fence(db: Db, lease: Lease) -> tuple[int, SessionState, float]:
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
    return sid, SessionState(last_seq, last_reply_seq, status), now


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
    await db.execute(
        "UPDATE loopwright_sessions SET status = 'running', epoch = %s, owner = %s, "
        "lease_expires = %s, updated_at = %s WHERE id = %s",
        (epoch + 1, owner, now + ttl, iso(now), sid),
    )
    died = status in ("running", "interrupted")
    return Claimed(Lease(key, owner, epoch + 1, now + ttl), died, last_seq)


NOTICE = "INSERT INTO loopwright_outbox (tenant, item, event, at) VALUES (%s, %s, %s, %s)"
"""An item became pending or was resolved: a row of the notifications' outbox, in the same
transaction (see `sqlite_rows.NOTICE`)."""


async def commit(
    db: Db,
    sid: int,
    tenant: str,
    state: SessionState,
    events: Sequence[ev.Event],
    at: str,
) -> int:
    """Append `events` after `state` with what they derive; returns the last seq."""
    derived = derive(state, events)
    if events:
        await db.cursor().executemany(
            "INSERT INTO loopwright_events VALUES (%s, %s, %s, %s, %s)",
            [(sid, seq, e.type, dumps(e), at) for seq, e in enumerate(events, state.last_seq + 1)],
        )
        found = blobs.rows(events, at)  # their bytes, once per hash
        if found:
            await db.cursor().executemany(blobs.PG_INSERT, found)
    for op in derived.ops:
        match op:
            case NewPending():
                await db.execute(
                    "INSERT INTO loopwright_pending (id, session, tenant, kind, call_id, tool, "
                    "args, scope, reason, requested_at, batch_seq, status) "
                    "VALUES (%s, %s, %s, %s, '', %s, %s, %s, %s, %s, %s, 'open')",
                    (
                        op.id,
                        sid,
                        tenant,
                        op.kind,
                        op.tool,
                        json.dumps(redact.deep(op.args)),
                        None if op.scope is None else json.dumps(op.scope),
                        redact.deep(op.reason),
                        op.requested_at,
                        op.batch_seq,
                    ),
                )
                await db.execute(NOTICE, (tenant, op.id, "pending", at))
            case SetCallId():
                await db.execute(
                    "UPDATE loopwright_pending SET call_id = %s, tool = coalesce(%s, tool) "
                    "WHERE id = %s AND session = %s",
                    (op.call_id, op.tool, op.id, sid),
                )
            case DecidePending():
                await db.execute(  # (one statement: no round trip in a pipeline)
                    "WITH decided AS (UPDATE loopwright_pending SET status = %s, "
                    "decided_by = %s, decided_at = %s, edited_args = %s, answer = %s, "
                    "note = %s WHERE id = %s AND session = %s AND status = 'open' RETURNING id) "
                    "INSERT INTO loopwright_outbox (tenant, item, event, at) "
                    "SELECT %s, id, 'resolved', %s FROM decided",  # (decided already: no notice)
                    (
                        op.status,
                        op.by,
                        op.decided_at,
                        None if op.edited_args is None else json.dumps(redact.deep(op.edited_args)),
                        redact.deep(op.answer),
                        redact.deep(op.note),
                        op.id,
                        sid,
                        tenant,
                        at,
                    ),
                )
            case NewUsage():
                await db.execute(
                    "INSERT INTO loopwright_usage VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        sid,
                        op.seq,
                        tenant,
                        op.model,
                        op.input_tokens,
                        op.output_tokens,
                        op.cache_read_tokens,
                        op.cache_write_tokens,
                        op.cost,
                        at,
                    ),
                )
    new = derived.state
    await db.execute(
        "UPDATE loopwright_sessions SET last_seq = %s, last_reply_seq = %s, status = %s, "
        "updated_at = %s WHERE id = %s",
        (new.last_seq, new.last_reply_seq, new.status, at, sid),
    )
    return new.last_seq


async def pending_item(db: Db, tenant: str, pending_id: str) -> PendingRecord:
    found = await one(
        db, f"SELECT {PENDING} WHERE p.id = %s AND p.tenant = %s", (pending_id, tenant)
    )
    if found is None:
        raise UnknownPending(f"no pending item {pending_id!r}")
    return pending_record(found)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
