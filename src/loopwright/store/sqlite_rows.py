"""The SQLite event log's statements: what runs inside a transaction, on the log's worker thread."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime

from .. import events as ev
from .. import redact
from ..errors import UnknownPending, UnknownSession
from ..wire import dumps
from . import PendingRecord, StaleWriter, blobs
from .derive import DecidePending, NewPending, NewUsage, Op, SessionState, SetCallId, derive
from .log import Lease, SessionKey
from .records import pending_record

PENDING = (
    "p.id, s.name, s.tenant, s.agent, p.kind, p.call_id, p.tool, p.args, p.reason, "
    "p.requested_at, p.batch_seq, p.status, p.decided_by, p.decided_at, p.edited_args, "
    "p.answer, p.note FROM pending p JOIN sessions s ON s.id = p.session"
)
SESSION = (
    "s.tenant, s.agent, s.name, s.status, s.last_seq, s.created_at, s.updated_at, s.owner, "
    "s.lease_expires, p.tenant, p.agent, p.name, s.id "
    "FROM sessions s LEFT JOIN sessions p ON p.id = s.parent"
)
USAGE = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
)


def session_id(db: sqlite3.Connection, key: SessionKey) -> int:
    row = db.execute(
        "SELECT id FROM sessions WHERE tenant=? AND agent=? AND name=?",
        (key.tenant, key.agent, key.id),
    ).fetchone()
    if row is None:
        raise unknown(key)
    return int(row[0])


def unknown(key: SessionKey) -> UnknownSession:
    return UnknownSession(f"no session {key.id!r}")


def state(db: sqlite3.Connection, sid: int) -> SessionState:
    row = db.execute(
        "SELECT last_seq, last_reply_seq, status FROM sessions WHERE id=?", (sid,)
    ).fetchone()
    return SessionState(*row)


def fence(db: sqlite3.Connection, lease: Lease) -> tuple[int, SessionState]:
    """The session's key and state, if `lease` still holds it; `StaleWriter` otherwise."""
    key = lease.key
    row = db.execute(
        "SELECT id, epoch, owner, last_seq, last_reply_seq, status FROM sessions "
        "WHERE tenant=? AND agent=? AND name=?",
        (key.tenant, key.agent, key.id),
    ).fetchone()
    if row is None:
        raise unknown(key)
    sid, epoch, owner, *state = row
    if epoch != lease.epoch or owner is None:
        how = "was released" if epoch == lease.epoch else f"was taken over (epoch {epoch})"
        raise StaleWriter(f"session {key.id}: this run's lease (epoch {lease.epoch}) {how}")
    return sid, SessionState(*state)


NOTICE = "INSERT INTO outbox (tenant, item, event, at) VALUES (?, ?, ?, ?)"
"""An item became pending or was resolved: the notifications' outbox (`store.outbox`) gets a
row in the same transaction, so a crash after the commit cannot lose its notifications."""

ADVANCE = (
    "UPDATE sessions SET last_seq=?, last_reply_seq=?, status=?, updated_at=? "
    "WHERE id=? AND last_seq=? AND last_reply_seq=? AND status=?"
)
FENCED = " AND epoch=? AND owner IS NOT NULL"


def commit(
    db: sqlite3.Connection,
    sid: int,
    tenant: str,
    state: SessionState,
    events: Sequence[ev.Event],
    at: str,
    *,
    epoch: int | None = None,
) -> SessionState | None:
    """Append `events` after `state` with what they derive; returns the row's new state.

    The session's row is moved on first, on the condition that it still stands at `state` (and,
    given `epoch`, that the lease of that epoch still holds it): when it does not, nothing is
    written and None is returned. So a writer that remembers the row as its last commit left
    it fences and appends without reading the row first, inside the same transaction."""
    derived = derive(state, events)
    new = derived.state
    moved = db.execute(
        ADVANCE if epoch is None else ADVANCE + FENCED,
        (new.last_seq, new.last_reply_seq, new.status, at, sid)
        + (state.last_seq, state.last_reply_seq, state.status)
        + (() if epoch is None else (epoch,)),
    )
    if moved.rowcount != 1:
        return None
    db.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
        [(sid, seq, e.type, dumps(e), at) for seq, e in enumerate(events, state.last_seq + 1)],
    )
    attached = blobs.rows(events, at)
    if attached:  # their bytes, once per hash
        db.executemany(blobs.SQLITE_INSERT, attached)
    for op in derived.ops:
        _apply(db, sid, tenant, op, at)
    return new


def _apply(db: sqlite3.Connection, sid: int, tenant: str, op: Op, at: str) -> None:
    match op:
        case NewPending():
            db.execute(
                "INSERT INTO pending (id, session, tenant, kind, call_id, tool, args, scope, "
                "reason, requested_at, batch_seq, status) "
                "VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, 'open')",
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
            db.execute(NOTICE, (tenant, op.id, "pending", at))
        case SetCallId():
            db.execute(
                "UPDATE pending SET call_id=?, tool=coalesce(?, tool) WHERE id=? AND session=?",
                (op.call_id, op.tool, op.id, sid),
            )
        case DecidePending():
            decided = db.execute(
                "UPDATE pending SET status=?, decided_by=?, decided_at=?, edited_args=?, "
                "answer=?, note=? WHERE id=? AND session=? AND status='open'",
                (
                    op.status,
                    op.by,
                    op.decided_at,
                    None if op.edited_args is None else json.dumps(redact.deep(op.edited_args)),
                    redact.deep(op.answer),
                    redact.deep(op.note),
                    op.id,
                    sid,
                ),
            )
            if decided.rowcount == 1:  # (an item decided already stays as it is: no notice)
                db.execute(NOTICE, (tenant, op.id, "resolved", at))
        case NewUsage():
            db.execute(
                "INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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


def pending_item(db: sqlite3.Connection, tenant: str, pending_id: str) -> PendingRecord:
    row = db.execute(f"SELECT {PENDING} WHERE p.id=? AND p.tenant=?", (pending_id, tenant))
    found = row.fetchone()
    if found is None:
        raise UnknownPending(f"no pending item {pending_id!r}")
    return pending_record(found)


def data_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA data_version").fetchone()[0])


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
