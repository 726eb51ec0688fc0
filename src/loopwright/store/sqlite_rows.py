"""The SQLite event log's statements: what runs inside a transaction, on the log's worker thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from .. import events as ev
from ..errors import SessionBusy
from . import blobs
from .derive import SessionRow, derive
from .log import Claimed, Lease, SessionKey, encoded
from .records import StaleWriter
from .sql import SQLITE, Do, Program, T, derived_rows, unknown
from .sql import iso as iso


def session_id(db: sqlite3.Connection, key: SessionKey) -> int:
    row = db.execute(
        "SELECT id FROM sessions WHERE tenant=? AND agent=? AND name=?",
        (key.tenant, key.agent, key.id),
    ).fetchone()
    if row is None:
        raise unknown(key)
    return int(row[0])


def state(db: sqlite3.Connection, sid: int) -> SessionRow:
    row = db.execute(
        "SELECT last_seq, last_reply_seq, status FROM sessions WHERE id=?", (sid,)
    ).fetchone()
    return SessionRow(*row)


def fence(db: sqlite3.Connection, lease: Lease) -> tuple[int, SessionRow]:
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
    return sid, SessionRow(*state)


def claim(
    db: sqlite3.Connection,
    key: SessionKey,
    owner: str,
    ttl: float,
    parent: SessionKey | None,
    clock: Callable[[], float],
) -> Claimed:
    """Take the session for a run (see `EventLog.claim`), reading `clock` once the write lock
    is held."""
    now = clock()  # once the write lock is ours
    row = db.execute(
        "SELECT id, status, epoch, owner, lease_expires, last_seq FROM sessions "
        "WHERE tenant=? AND agent=? AND name=?",
        (key.tenant, key.agent, key.id),
    ).fetchone()
    if row is None:
        if parent is not None and parent.tenant != key.tenant:
            raise unknown(parent)
        parent_id = None if parent is None else session_id(db, parent)
        db.execute(
            "INSERT INTO sessions (tenant, agent, name, parent, status, epoch, owner, "
            "lease_expires, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, 'running', 1, ?, ?, ?, ?)",
            (
                key.tenant,
                key.agent,
                key.id,
                parent_id,
                owner,
                now + ttl,
                *[iso(now)] * 2,
            ),
        )
        return Claimed(Lease(key, owner, 1, now + ttl), False, 0)
    sid, status, epoch, holder, expires, last_seq = row
    if holder is not None and expires is not None and expires > now:
        raise SessionBusy(f"session {key.id} is held by another run until {iso(expires)}")
    db.execute(SQLITE.take_over, (epoch + 1, owner, now + ttl, iso(now), sid))
    died = status in ("running", "interrupted")
    return Claimed(Lease(key, owner, epoch + 1, now + ttl), died, last_seq)


ADVANCE = SQLITE.advance + " AND last_seq = ? AND last_reply_seq = ? AND status = ?"
"""The session's row moved on, if it still stands as the caller remembers it."""
FENCED = ADVANCE + " AND epoch = ? AND owner IS NOT NULL"


def commit(
    db: sqlite3.Connection | sqlite3.Cursor,
    sid: int,
    tenant: str,
    state: SessionRow,
    events: Sequence[ev.Event],
    at: str,
    *,
    epoch: int | None = None,
) -> SessionRow | None:
    """Append `events` after `state` with what they derive; returns the row's new state.

    The session's row is moved on first, on the condition that it still stands at `state` (and,
    given `epoch`, that the lease of that epoch still holds it): when it does not, nothing is
    written and None is returned. So a writer that remembers the row as its last commit left
    it fences and appends without reading the row first, inside the same transaction."""
    derived = derive(state, events)
    new = derived.state
    moved = db.execute(
        ADVANCE if epoch is None else FENCED,
        (new.last_seq, new.last_reply_seq, new.status, at, sid)
        + (state.last_seq, state.last_reply_seq, state.status)
        + (() if epoch is None else (epoch,)),
    )
    if moved.rowcount != 1:
        return None
    db.executemany(
        SQLITE.insert_events,
        [
            (sid, seq, e.type, text, at)
            for seq, (e, text) in enumerate(
                zip(events, encoded(events), strict=True), state.last_seq + 1
            )
        ],
    )
    attached = blobs.rows(events, at)
    if attached:  # their bytes, once per hash
        db.executemany(SQLITE.insert_blob, attached)
    if derived.ops:
        for step in derived_rows(SQLITE, derived.ops, sid, tenant, at):
            db.execute(step.text, step.params)
    return new


def run(db: sqlite3.Connection, program: Program[T]) -> T:
    """Run a program (`sql`) on the connection, statement by statement."""
    rows: Any = None
    while True:
        try:
            step = program.send(rows)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]
        if isinstance(step, Do):
            (db.executemany if step.many else db.execute)(step.text, step.params)
            rows = None
        else:
            rows = db.execute(step.text, step.params).fetchall()


def data_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA data_version").fetchone()[0])
