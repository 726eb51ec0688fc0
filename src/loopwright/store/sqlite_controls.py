"""The SQLite log's controls: the statements behind `send_control`, `controls`, `delivered` and
`withdraw` (see `store.log`), each a function of the log's connection run on its worker.

A control row is addressed to (session, epoch) and goes `sent` → `taken` (by the run of that
lease, fenced like its appends) or `sent` → `withdrawn` (by its sender, once that run can no
longer take it); each change is one conditional UPDATE, so exactly one of the two wins.
"""

from __future__ import annotations

import sqlite3

from .. import redact
from . import sqlite_rows as sql
from .log import ControlKind, Lease, QueuedControl, SessionKey
from .sql import SQLITE, unknown


def send(
    db: sqlite3.Connection, key: SessionKey, kind: ControlKind, text: str | None, now: float
) -> QueuedControl | None:
    row = db.execute(
        "SELECT id, epoch, owner, lease_expires FROM sessions "
        "WHERE tenant=? AND agent=? AND name=?",
        (key.tenant, key.agent, key.id),
    ).fetchone()
    if row is None:
        raise unknown(key)
    sid, epoch, owner, expires = row
    if owner is None or expires is None or expires <= now:
        return None
    text = None if text is None else redact.text(text)  # stored as the log stores events
    [(made,)] = db.execute(SQLITE.send_control, (sid, epoch, kind, text, sql.iso(now))).fetchall()
    return QueuedControl(made, key, epoch, kind, text)


def waiting(db: sqlite3.Connection, lease: Lease) -> bool:
    """Whether controls wait for the run of `lease` (a read); `StaleWriter` once it lost it."""
    sid = sql.fence(db, lease)[0]
    row = db.execute(
        "SELECT 1 FROM controls WHERE session=? AND epoch=? AND state='sent' LIMIT 1",
        (sid, lease.epoch),
    ).fetchone()
    return row is not None


def take(db: sqlite3.Connection, lease: Lease, now: float) -> list[QueuedControl]:
    """Take what was sent to the run of `lease` (in a write transaction); `StaleWriter`."""
    sid = sql.fence(db, lease)[0]
    rows = db.execute(SQLITE.take_controls, (sql.iso(now), sid, lease.epoch)).fetchall()
    return [QueuedControl(n, lease.key, lease.epoch, kind, text) for n, kind, text in sorted(rows)]


def outcome(db: sqlite3.Connection, control: QueuedControl, now: float) -> tuple[str, bool]:
    """The control's state, and whether the run it was sent to still holds its session."""
    state, epoch, owner, expires, _ = db.execute(SQLITE.control_outcome, (control.id,)).fetchone()
    holds = epoch == control.epoch and owner is not None and expires is not None and expires > now
    return state, holds


def withdraw(db: sqlite3.Connection, control: QueuedControl, now: float) -> bool:
    db.execute(SQLITE.withdraw_control, (sql.iso(now), control.id))
    row = db.execute(SQLITE.control_state, (control.id,)).fetchone()
    return bool(row[0] == "withdrawn")


def sent_since(db: sqlite3.Connection, high: int | None) -> tuple[int, set[SessionKey] | None]:
    """Controls sent after row `high`: the new high mark and the sessions they went to (None:
    any session — the first look, which only sets the mark)."""
    if high is None:
        row = db.execute("SELECT coalesce(max(id), 0) FROM controls").fetchone()
        return int(row[0]), None
    rows = db.execute(
        "SELECT c.id, s.tenant, s.agent, s.name FROM controls c "
        "JOIN sessions s ON s.id = c.session WHERE c.id > ?",
        (high,),
    ).fetchall()
    if not rows:
        return high, set()
    return max(r[0] for r in rows), {SessionKey(*r[1:]) for r in rows}
