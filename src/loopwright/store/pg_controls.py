"""The PostgreSQL log's controls: the statements behind `send_control`, `controls`, `delivered`
and `withdraw` (see `store.log`), as `sqlite_controls` has them for SQLite.

A control row is addressed to (session, epoch) and goes `sent` → `taken` (by the run of that
lease, fenced like its appends: the session's row locked, its epoch checked) or `sent` →
`withdrawn` (by its sender, once that run can no longer take it); each change is one conditional
UPDATE, so exactly one of the two wins. A sent control is told to the session's listeners as
"<session> c", a taken one as "<session> t" (`pg_listen`).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import redact
from ..errors import UnknownSession
from . import pg_rows as sql
from .log import ControlKind, Lease, QueuedControl, SessionKey
from .pg_listen import CONTROL, TAKEN
from .pg_pool import Told
from .pg_rows import Db
from .records import StaleWriter
from .sql import POSTGRES, astuple, iso, unknown

Now = Callable[[float], float]
"""The log's clock, given the database's."""


async def send(
    db: Db, key: SessionKey, kind: ControlKind, text: str | None, now: Now, told: Told
) -> QueuedControl | None:
    row = await sql.one(
        db,
        f"SELECT id, epoch, owner, lease_expires, {sql.NOW} FROM loopwright_sessions "
        f"WHERE {sql.BY_KEY} FOR UPDATE",
        astuple(key),
    )
    if row is None:
        raise unknown(key)
    sid, epoch, owner, expires, db_now = row
    at = now(db_now)
    if owner is None or expires is None or expires <= at:
        return None
    text = None if text is None else redact.text(text)  # stored as the log stores events
    made = await sql.one(db, POSTGRES.send_control, (sid, epoch, kind, text, iso(at)))
    assert made is not None
    told.append((sid, CONTROL))
    return QueuedControl(made[0], key, epoch, kind, text)


async def waiting(db: Db, lease: Lease) -> tuple[int, bool]:
    """The session's row id, and whether controls wait for the run of `lease`; `StaleWriter`
    once it lost it."""
    row = await sql.one(
        db,
        "SELECT s.id, s.epoch, s.owner, EXISTS (SELECT 1 FROM loopwright_controls c "
        "WHERE c.session = s.id AND c.epoch = %s AND c.state = 'sent') "
        "FROM loopwright_sessions s WHERE s.tenant = %s AND s.agent = %s AND s.name = %s",
        (lease.epoch, *astuple(lease.key)),
    )
    if row is None:
        raise unknown(lease.key)
    sid, epoch, owner, sent = row
    if epoch != lease.epoch or owner is None:
        how = "was released" if epoch == lease.epoch else f"was taken over (epoch {epoch})"
        raise StaleWriter(f"session {lease.key.id}: this run's lease (epoch {lease.epoch}) {how}")
    return sid, bool(sent)


async def take(db: Db, lease: Lease, now: Now, told: Told) -> list[QueuedControl]:
    sid, _, db_now = await sql.fence(db, lease)
    taking = (iso(now(db_now)), sid, lease.epoch)
    rows = await (await db.execute(POSTGRES.take_controls, taking)).fetchall()
    if rows:
        told.append((sid, TAKEN))
    return [QueuedControl(n, lease.key, lease.epoch, kind, text) for n, kind, text in sorted(rows)]


async def outcome(db: Db, control: QueuedControl, now: Now) -> tuple[str, bool]:
    """The control's state, and whether the run it was sent to still holds its session."""
    row = await sql.one(db, POSTGRES.control_outcome, (control.id,))
    if row is None:
        raise UnknownSession(f"no control {control.id} for session {control.key.id!r}")
    state, epoch, owner, expires, db_now = row
    holds = epoch == control.epoch and owner is not None and expires is not None
    return state, holds and expires > now(db_now)


async def withdraw(db: Db, control: QueuedControl, now: Now) -> bool:
    row = await sql.one(db, f"SELECT {sql.NOW}")
    assert row is not None
    await db.execute(POSTGRES.withdraw_control, (iso(now(row[0])), control.id))
    state = await sql.one(db, POSTGRES.control_state, (control.id,))
    return state is not None and state[0] == "withdrawn"
