"""The PostgreSQL event log: one database shared by every process of a deployment, on as many
machines as there are (`pip install 'loopwright[postgres]'`).

Calls run on a `psycopg_pool.AsyncConnectionPool`; every write is one transaction that first
locks its session's row, so writes to one session serialise (seqs stay gapless) and a lease's
epoch is checked inside the transaction that appends under it: a stale writer's append is
refused by the database. Leases are judged by the database's clock, one clock for every machine
(or by an injected `clock`, as the tests do). Once a transaction that appended events has
committed, the log NOTIFYs the session's key and last seq (in the same round trip);
`follow` and `wait_decided` wake on it and read from the table (`pg_listen`). The pool, and how
a job runs on it (to its end even when its caller is cancelled, as on SQLite), are `pg_pool`'s.

The log connects on first use (in the event loop that uses it), creating or migrating its tables
(`pg_schema`); `open_log` opens it at once, so that a bad URL or a newer schema fails there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from .. import events as ev
from ..errors import UnknownPending
from . import forking
from . import pg_controls as ctl
from . import pg_rows as sql
from . import read_models as rm
from .log import (
    POOL_SIZE,
    Claimed,
    ControlKind,
    Decided,
    Lease,
    Page,
    QueuedControl,
    SessionKey,
    SessionRecord,
    Snapshot,
    Verdict,
    pool_size_of,
)
from .pg_listen import CONTROL, TAKEN, Wakeups
from .pg_pool import CONNECT_TIMEOUT, Database, Told
from .pg_rows import Db
from .pg_schema import shown
from .records import PendingRecord, PendingStatus, SessionStatus, StoredEvent, StoreError
from .sql import POSTGRES, Dialect, Program, T, iso
from .sql_outbox import SQLOutbox
from .usage_report import UsageQuery, report

LOOK_AGAIN = 0.2
"""Seconds between a sender's looks at a control its run has not taken (`delivered`)."""


class PostgresLog:
    """An `EventLog` on a PostgreSQL database (see the module docstring). `conninfo` is a
    `postgresql://` URL or a libpq connection string; the tables go in its current schema.
    `pool_size` is the most connections its pool opens (psycopg_pool's `max_size`; it keeps
    one open: `min_size` 1) beside its listening ones; a `ConfigError` unless a positive integer.
    A call fails (`StoreError`) once it waited `connect_timeout` seconds for a connection."""

    def __init__(
        self,
        conninfo: str,
        *,
        clock: Callable[[], float] | None = None,
        pool_size: int = POOL_SIZE,
        recheck: float = 5.0,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.conninfo = conninfo
        self.where = shown(conninfo)
        self.clock = clock
        """None: the database's clock."""
        size = pool_size_of(pool_size)
        self.db = Database(
            conninfo, self.where, pool_size=size, recheck=recheck, connect_timeout=connect_timeout
        )
        self._run = self.db.run
        self._ids: dict[SessionKey, int] = {}

    @property
    def _wakeups(self) -> Wakeups | None:
        return self.db.wakeups

    async def open(self) -> PostgresLog:
        """Connect and migrate now (otherwise the first call does); `StoreError` if it cannot."""
        await self.db.ready()
        return self

    def _now(self, db_now: float) -> float:
        return db_now if self.clock is None else self.clock()

    def _program(
        self, make: Callable[[Dialect], Program[T]], *, write: bool = False
    ) -> Awaitable[T]:
        """Run a program written for both backends (`sql`) on a pooled connection (made
        afresh for each try of the job)."""
        return self._run(lambda db: sql.run(db, make(POSTGRES)), write=write)

    async def _sid(self, key: SessionKey) -> int:
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[key] = await self._run(lambda db: sql.session_id(db, key))
        return sid

    # ---- the writer's side -------------------------------------------------------------------

    async def claim(
        self, key: SessionKey, owner: str, *, ttl: float, parent: SessionKey | None = None
    ) -> Claimed:
        return await self._run(
            lambda db: sql.claim(db, key, owner, ttl, parent, self._now), write=True
        )

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        async def job(db: Db) -> Lease:
            sid, _, db_now = await sql.fence(db, lease)
            expires = self._now(db_now) + ttl
            await db.execute(POSTGRES.renew, (expires, sid))
            return replace(lease, expires=expires)

        return await self._run(job, write=True)

    async def release(self, lease: Lease, status: SessionStatus) -> None:
        async def job(db: Db) -> int:
            sid, _, db_now = await sql.fence(db, lease)
            await db.execute(POSTGRES.release, (status, iso(self._now(db_now)), sid))
            return sid

        sid = await self._run(job, write=True)
        if self.db.controls is not None:
            self.db.controls.wake(sid, CONTROL)  # its listener here ends

    async def append(self, lease: Lease, events: Sequence[ev.Event]) -> int:
        told: Told = []

        async def job(db: Db) -> int:
            sid, state, db_now = await sql.fence(db, lease)
            at = iso(self._now(db_now))
            last = await sql.commit(db, sid, lease.key.tenant, state, events, at)
            self._ids[lease.key] = sid
            if events:
                told.append((sid, str(last)))
            return last

        return await self._run(job, write=True, told=told)

    async def decide(self, tenant: str, pending_id: str, decision: Verdict) -> Decided:
        told: Told = []

        async def job(db: Db) -> Decided:
            row = await sql.one(
                db,
                "SELECT session FROM loopwright_pending WHERE id = %s AND tenant = %s",
                (pending_id, tenant),
            )
            if row is None:
                raise UnknownPending(f"no pending item {pending_id!r}")
            sid = row[0]
            state, db_now = await sql.locked(db, sid)  # the item is read under its session's lock
            at = iso(self._now(db_now))
            item, decided = await sql.run(
                db, rm.decision(POSTGRES, tenant, pending_id, decision, at)
            )
            if decided is not None:
                told.append((sid, str(await sql.commit(db, sid, tenant, state, decided, at))))
                item = await sql.run(db, rm.pending_item(POSTGRES, tenant, pending_id))
            left = await sql.run(db, rm.open_in_batch(POSTGRES, pending_id))
            return Decided(decided is not None, item, left)

        return await self._run(job, write=True, told=told)

    async def save_snapshot(self, lease: Lease, snapshot: Snapshot) -> None:
        async def job(db: Db) -> None:
            sid, state, db_now = await sql.fence(db, lease)
            if not 0 <= snapshot.seq <= state.last_seq:
                raise StoreError(
                    f"session {lease.key.id}: a snapshot at seq {snapshot.seq} is past "
                    f"the log's end ({state.last_seq})"
                )
            at = iso(self._now(db_now))
            await db.execute(POSTGRES.save_snapshot, (sid, snapshot.seq, snapshot.data, at))

        await self._run(job, write=True)

    async def fork(self, source: SessionKey, at: int, new_id: str) -> SessionKey:
        return await self._program(forking.fork(source, at, new_id, self._now), write=True)

    # ---- controls ----------------------------------------------------------------------------

    async def send_control(
        self, key: SessionKey, kind: ControlKind, text: str | None = None
    ) -> QueuedControl | None:
        told: Told = []
        return await self._run(
            lambda db: ctl.send(db, key, kind, text, self._now, told), write=True, told=told
        )

    async def controls(self, lease: Lease) -> AsyncIterator[QueuedControl]:
        sid = await self._sid(lease.key)
        wakeups = await self.db.listening(CONTROL)
        while True:
            tick = wakeups.tick(sid, CONTROL)  # taken before reading
            if (await self._run(lambda db: ctl.waiting(db, lease)))[1]:
                told: Told = []
                take = partial(ctl.take, lease=lease, now=self._now, told=told)
                taken = await self._run(take, write=True, told=told)
                for control in taken:
                    yield control
                continue
            await wakeups.wait(tick)

    async def delivered(self, control: QueuedControl) -> bool:
        sid = await self._sid(control.key)
        wakeups = await self.db.listening(CONTROL)
        while True:
            tick = wakeups.tick(sid, TAKEN)
            state, holds = await self._run(lambda db: ctl.outcome(db, control, self._now))
            if state != "sent":
                return state == "taken"
            if not holds:
                return not await self.withdraw(control)
            # a run that ends without taking it tells nobody: look again every little while
            await asyncio.wait((tick,), timeout=min(self.db.recheck, LOOK_AGAIN))

    async def withdraw(self, control: QueuedControl) -> bool:
        return await self._run(lambda db: ctl.withdraw(db, control, self._now), write=True)

    # ---- the readers' side -------------------------------------------------------------------

    async def read(
        self, key: SessionKey, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        return await self._read(await self._sid(key), after, limit)

    async def _read(self, sid: int, after: int, limit: int | None) -> list[StoredEvent]:
        return await self._program(lambda d: rm.events(d, sid, after, limit))

    async def follow(self, key: SessionKey, *, after: int) -> AsyncIterator[StoredEvent]:
        sid = await self._sid(key)
        wakeups = await self._listening()
        position = after
        while True:
            tick = wakeups.tick(sid)  # taken before reading: no commit slips between
            batch = await self._read(sid, position, 500)
            for stored in batch:
                position = stored.seq
                yield stored
            if not batch:
                await wakeups.wait(tick)

    async def wait_decided(self, tenant: str, pending_id: str) -> PendingRecord:
        async def job(db: Db) -> tuple[int, PendingRecord]:
            row = await sql.one(
                db,
                "SELECT session FROM loopwright_pending WHERE id = %s AND tenant = %s",
                (pending_id, tenant),
            )
            if row is None:
                raise UnknownPending(f"no pending item {pending_id!r}")
            return row[0], await sql.run(db, rm.pending_item(POSTGRES, tenant, pending_id))

        sid, item = await self._run(job)
        if item.status != "open":
            return item
        wakeups = await self._listening()
        while True:
            tick = wakeups.tick(sid)
            item = await self.pending_item(tenant, pending_id)
            if item.status != "open":
                return item
            await wakeups.wait(tick)

    async def _listening(self) -> Wakeups:
        return await self.db.listening()

    async def attachments(self, hashes: Sequence[str]) -> dict[str, bytes]:
        return await self._program(lambda d: rm.attachments(d, hashes)) if hashes else {}

    async def snapshot(self, key: SessionKey) -> Snapshot | None:
        sid = await self._sid(key)
        return await self._program(lambda d: rm.snapshot(d, sid))

    async def session(self, key: SessionKey) -> SessionRecord:
        return await self._program(lambda d: rm.session(d, key, self._now))

    async def sessions(
        self, tenant: str, agent: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> Page:
        return await self._program(
            lambda d: rm.sessions(d, tenant, agent, limit, cursor, self._now)
        )

    async def tenants(self) -> list[str]:
        return await self._program(rm.tenants)

    async def pending(
        self,
        tenant: str,
        *,
        agent: str | None = None,
        session: SessionKey | None = None,
        status: PendingStatus | None = "open",
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        return await self._program(
            lambda d: rm.pending(d, tenant, agent, session, status, limit, cursor)
        )

    async def pending_item(self, tenant: str, pending_id: str) -> PendingRecord:
        return await self._program(lambda d: rm.pending_item(d, tenant, pending_id))

    async def usage(self, tenant: str, *, key: SessionKey | None = None) -> dict[str, Any]:
        return await self._program(lambda d: rm.usage(d, tenant, key))

    def outbox(self) -> SQLOutbox:
        """Its notifications' outbox (`store.outbox.outbox_of`)."""
        return SQLOutbox(self)

    async def usage_report(self, query: UsageQuery) -> Page:
        return await self._program(lambda d: report(d, query))

    async def close(self) -> None:
        await self.db.close()
