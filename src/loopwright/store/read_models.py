"""The event log's read models, written once for both backends as programs over `sql`'s dialect:
sessions (one, or a page), pending items (one, or a page), usage sums, and the reads of a
session's events and snapshot. A backend runs them on its own connection (`sql`'s docstring).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..errors import UnknownPending
from ..events import PendingDecided
from ..wire import loads
from .derive import decision_events
from .log import (
    Lineage,
    Page,
    SessionKey,
    SessionRecord,
    Snapshot,
    Verdict,
    pending_cursor,
    session_cursor,
)
from .records import PendingRecord, PendingStatus, StoredEvent
from .sql import Dialect, Now, Program, Rows, astuple, unknown

SESSION = (
    "SELECT s.tenant, s.agent, s.name, s.status, s.last_seq, s.created_at, s.updated_at, "
    "s.owner, s.lease_expires, p.tenant, p.agent, p.name, s.id, {now}, f.name, s.forked_at, "
    "s.title "
    "FROM {sessions} s LEFT JOIN {sessions} p ON p.id = s.parent "
    "LEFT JOIN {sessions} f ON f.id = s.forked_from"
)
"""A session's row (`session_record`), its row id, the database's clock, its lineage and its
stored title."""
PENDING = (
    "SELECT p.{n}, p.id, s.name, s.tenant, s.agent, p.kind, p.call_id, p.tool, p.args, p.reason, "
    "p.requested_at, p.batch_seq, p.status, p.decided_by, p.decided_at, p.edited_args, "
    "p.answer, p.note FROM {pending} p JOIN {sessions} s ON s.id = p.session"
)
"""An item's row number (its place in request order), then its row (`pending_record`)."""
USAGE = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
)
SUMS = (
    "SELECT count(u.seq), coalesce(sum(u.input_tokens), 0){bigint}, "
    "coalesce(sum(u.output_tokens), 0){bigint}, coalesce(sum(u.cache_read_tokens), 0){bigint}, "
    "coalesce(sum(u.cache_write_tokens), 0){bigint}, sum(u.cost)"
)


def session(d: Dialect, key: SessionKey, now: Now) -> Program[SessionRecord]:
    """`UnknownSession` for an unknown or foreign key."""
    rows = yield Rows(
        d(f"{SESSION} WHERE s.tenant = ? AND s.agent = ? AND s.name = ?"), astuple(key)
    )
    if not rows:
        raise unknown(key)
    return session_record(rows[0], now(rows[0][13]))


def sessions(
    d: Dialect, tenant: str, agent: str | None, limit: int, cursor: str | None, now: Now
) -> Program[Page]:
    """A page of `SessionRecord`s, most recently updated first (the cursor: `<row>:<updated>`)."""
    where, params = ["s.tenant = ?"], list[Any]([tenant])
    if agent is not None:
        where.append("s.agent = ?")
        params.append(agent)
    if cursor:
        after_id, after_at = session_cursor(cursor)
        where.append("(s.updated_at, s.id) < (?, ?)")
        params += [after_at, after_id]
    rows = yield Rows(
        d(f"{SESSION} WHERE {' AND '.join(where)} ORDER BY s.updated_at DESC, s.id DESC LIMIT ?"),
        (*params, limit + 1),
    )
    clock = now(rows[0][13]) if rows else 0.0
    items = [session_record(row, clock) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(items, None if last is None else f"{last[12]}:{last[6]}")


def tenants(d: Dialect) -> Program[list[str]]:
    """Every tenant with a session, in order."""
    rows = yield Rows(d("SELECT DISTINCT tenant FROM {sessions} ORDER BY tenant"), ())
    return [row[0] for row in rows]


def pending(
    d: Dialect,
    tenant: str,
    agent: str | None,
    key: SessionKey | None,
    status: PendingStatus | None,
    limit: int,
    cursor: str | None,
) -> Program[Page]:
    """A page of `PendingRecord`s in request order (the cursor: the last one's row number); an
    unknown or foreign session has none."""
    where, params = ["p.tenant = ?"], list[Any]([tenant])
    if key is not None:
        if key.tenant != tenant:
            return Page([], None)
        where.append(
            "p.session = (SELECT id FROM {sessions} WHERE tenant = ? AND agent = ? AND name = ?)"
        )
        params += astuple(key)
    for clause, value in (("s.agent = ?", agent), ("p.status = ?", status)):
        if value is not None:
            where.append(clause)
            params.append(value)
    if cursor:
        where.append("p.{n} > ?")
        params.append(pending_cursor(cursor))
    rows = yield Rows(
        d(f"{PENDING} WHERE {' AND '.join(where)} ORDER BY p.{{n}} LIMIT ?"), (*params, limit + 1)
    )
    items = [pending_record(row[1:]) for row in rows[:limit]]
    return Page(items, str(rows[limit - 1][0]) if len(rows) > limit else None)


def pending_item(d: Dialect, tenant: str, pending_id: str) -> Program[PendingRecord]:
    """`UnknownPending` for an unknown or foreign id."""
    rows = yield Rows(d(f"{PENDING} WHERE p.id = ? AND p.tenant = ?"), (pending_id, tenant))
    if not rows:
        raise UnknownPending(f"no pending item {pending_id!r}")
    return pending_record(rows[0][1:])


BATCH = "(session, batch_seq) = (SELECT session, batch_seq FROM {pending} WHERE id = ?)"
"""The items of the batch of the item whose id is the parameter."""


def decision(
    d: Dialect, tenant: str, pending_id: str, verdict: Verdict, at: str
) -> Program[tuple[PendingRecord, list[PendingDecided] | None]]:
    """The item, and the events that record `verdict` on it as the rule book rules it on its
    batch's rows (None: refused, the first decision wins). Run in the transaction that appends
    them (PostgreSQL: under the session's lock)."""
    item = yield from pending_item(d, tenant, pending_id)
    batch = yield Rows(
        d(f"SELECT id, kind, status FROM {{pending}} WHERE {BATCH} ORDER BY {{n}}"), (pending_id,)
    )
    v = verdict
    return item, decision_events(
        pending_id,
        v.status,
        v.by,
        at,
        edited_args=v.edited_args,
        answer=v.answer,
        note=v.note,
        batch=[tuple(row) for row in batch],
    )


def open_in_batch(d: Dialect, pending_id: str) -> Program[int]:
    """How many items of the item's batch are still open."""
    rows = yield Rows(
        d(f"SELECT count(*) FROM {{pending}} WHERE {BATCH} AND status = 'open'"), (pending_id,)
    )
    return int(rows[0][0])


def usage(d: Dialect, tenant: str, key: SessionKey | None) -> Program[dict[str, Any]]:
    """Requests, tokens and cost summed over the tenant or one of its sessions."""
    if key is None:
        rows = yield Rows(d(f"{SUMS} FROM {{usage}} u WHERE u.tenant = ?"), (tenant,))
    else:
        if key.tenant != tenant:
            raise unknown(key)
        rows = yield Rows(
            d(
                f"{SUMS} FROM {{sessions}} s LEFT JOIN {{usage}} u ON u.session = s.id "
                "WHERE s.tenant = ? AND s.agent = ? AND s.name = ? GROUP BY s.id"
            ),
            astuple(key),
        )
        if not rows:
            raise unknown(key)
    return dict(zip(USAGE, rows[0], strict=True))


def events(d: Dialect, sid: int, after: int, limit: int | None) -> Program[list[StoredEvent]]:
    """A session's events after `after`, in order (at most `limit`)."""
    rows = yield Rows(
        d("SELECT seq, data, at FROM {events} WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?"),
        (sid, after, d.unlimited if limit is None else limit),
    )
    return [StoredEvent(seq, loads(data), at) for seq, data, at in rows]


def snapshot(d: Dialect, sid: int) -> Program[Snapshot | None]:
    rows = yield Rows(d("SELECT seq, data FROM {snapshots} WHERE session = ?"), (sid,))
    return Snapshot(rows[0][0], rows[0][1]) if rows else None


def attachments(d: Dialect, hashes: Sequence[str]) -> Program[dict[str, bytes]]:
    """The bytes stored under `hashes` (those the log has: `blobs`)."""
    rows = yield Rows(
        d("SELECT sha256, data FROM {attachments} WHERE sha256 {in_texts}"), (d.texts(hashes),)
    )
    return {sha: bytes(data) for sha, data in rows}


def pending_record(row: Sequence[Any]) -> PendingRecord:
    record = PendingRecord(*row)
    return replace(
        record,
        args=json.loads(row[7]),
        edited_args=None if row[14] is None else json.loads(row[14]),
    )


def session_record(row: Sequence[Any], now: float) -> SessionRecord:
    tenant, agent, name, status, last_seq, created, updated, owner, expires = row[:9]
    if owner is not None and expires is not None and expires > now:
        status = "running"
    elif status == "running":
        status = "interrupted"  # its run ended without its `done` and let the lease expire
    parent = None if row[9] is None else SessionKey(row[9], row[10], row[11])
    return SessionRecord(
        SessionKey(tenant, agent, name),
        status,
        last_seq,
        created,
        updated,
        parent,
        owner,
        expires if owner is not None else None,
        None if row[14] is None else Lineage(row[14], row[15]),
        row[16],
    )
