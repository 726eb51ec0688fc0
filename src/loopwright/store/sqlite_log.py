"""The SQLite event log: the embedded default, one database file (WAL) shared by the processes
of one machine.

Every call runs on one worker thread per `SQLiteLog`, on its one connection, one call at a time,
so the event loop never waits on SQLite (`sqlite_worker`) — except a short call that nothing
would make wait: an append under the lease of the last append or claim, a claim, a release, a
session's row, pending items. With the worker idle, `durability="normal"` and, for a write, the
write lock free, it runs on the event loop, which saves the two thread hand-overs (as long as
the call itself); see `sqlite_worker` and bench/DURABLE.md (`inline_appends=False` turns it
off). `append` returns a future, done already in that case, so awaiting it takes no task and no
turn of the loop. Every write runs inside a `BEGIN IMMEDIATE` transaction — on the worker,
shared by the writes that wait while one starts, each in a savepoint of its own, and answered
only once it committed: writers of several processes serialise on SQLite's write lock, seqs
stay gapless, and a lease's epoch is checked inside the transaction that appends under it (by
reading the session's row, or by updating it on the condition that it stands as this log's last
append under that epoch left it: one statement fewer). WAL checkpoints run on a thread of their
own (`sqlite_checkpoints`), never inside a commit.

Waiters (`follow`, `wait_decided`, a sender's `delivered`) are woken as this log commits;
other processes' commits are noticed by a task that watches `PRAGMA data_version` every
`poll_interval` seconds while someone waits. A run that listens for controls (`controls`) is
woken only by controls sent to its session (`sqlite_controls.sent_since`: never by the run's
own appends) and by its lease's release here.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from .. import events as ev
from . import forking
from . import read_models as rm
from . import sqlite_controls as ctl
from . import sqlite_rows as sql
from .derive import SessionRow
from .log import (
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
)
from .records import PendingRecord, PendingStatus, SessionStatus, StoredEvent, StoreError
from .sql import SQLITE, Dialect, Program
from .sql_outbox import SQLOutbox
from .sqlite_checkpoints import Checkpointer
from .sqlite_schema import migrate
from .sqlite_watch import Watch
from .sqlite_worker import Worker
from .usage_report import UsageQuery, report

T = TypeVar("T")
HEADS = 1024
"""Rows remembered for appends without a read (forgotten all at once beyond that)."""
Head = tuple[str, str, str, int]
"""A run's place in `_heads`: its session's key (as its strings: hashed without a call of the
key's `__hash__`) and its lease's epoch (`_head`)."""


class SQLiteLog:
    """An `EventLog` on one SQLite file (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        durability: Literal["normal", "full"] = "normal",
        busy_timeout: float = 5.0,
        poll_interval: float = 0.05,
        checkpoint_every: int = 128,
        inline_appends: bool = True,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.poll_interval = poll_interval
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path, isolation_level=None, timeout=busy_timeout, check_same_thread=False
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            synchronous = "FULL" if durability == "full" else "NORMAL"
            db.execute(f"PRAGMA synchronous={synchronous}")
            db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpoints' thread runs them
            migrate(db, self.path)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{self.path}: not a usable loopwright database ({exc})") from None
        except BaseException:
            db.close()
            raise
        self._db = db
        self._checkpoints = Checkpointer(
            self.path, synchronous, every=checkpoint_every, wait=busy_timeout
        )
        self._heads: dict[Head, tuple[int, SessionRow]] = {}
        """Per lease (key, epoch), the session's row as this log's last append left it (used
        with the connection only): the next append under it fences by updating that row."""
        self._closed = False
        self._waits = Watch(self._submit, poll_interval)
        self._runner = Worker(db, self.path, self._checkpoints, self._waits.notify, busy_timeout)
        self._now = durability == "normal" and inline_appends
        self._appender: Head | None = None
        """The lease of the last append: one that follows an append under another lease
        goes to the worker, where appends of several runs at once share transactions."""
        self._worker = self._runner.thread

    # ---- the worker thread (sqlite_worker) ----------------------------------------------------

    async def _call(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        """Run `fn` on the worker thread; `write`: inside a write transaction (maybe shared)."""
        return await self._submit(fn, write)  # type: ignore[no-any-return]

    async def _briefly(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        """A short call (a row, or a bounded page): on the event loop when nothing would wait
        for it, as an append (the worker idle; for a write, the write lock free), else on the
        worker."""
        if self._now and not self._closed:
            done, value = self._runner.now(fn, write)
            if done:
                if write:
                    self._waits.notify()
                return value  # type: ignore[no-any-return]
        return await self._call(fn, write=write)

    def _submit(self, fn: Callable[[sqlite3.Connection], Any], write: bool) -> asyncio.Future[Any]:
        if self._closed:
            raise StoreError(f"{self.path}: the log is closed")
        return self._runner.submit(fn, write)

    def _program(
        self, make: Callable[[Dialect], Program[T]], *, write: bool = False
    ) -> Awaitable[T]:
        """Run a program written for both backends (`sql`) on the worker."""
        return self._call(lambda db: sql.run(db, make(SQLITE)), write=write)

    def _clock(self, _: float | None) -> float:
        """The log's clock (`sql.Now`: the database's is not asked for)."""
        return self.clock()

    @property
    def _poller(self) -> asyncio.Task[None] | None:
        return self._waits.poller

    # ---- the writer's side -------------------------------------------------------------------

    async def claim(
        self, key: SessionKey, owner: str, *, ttl: float, parent: SessionKey | None = None
    ) -> Claimed:
        claimed = await self._briefly(
            lambda db: sql.claim(db, key, owner, ttl, parent, self.clock), write=True
        )
        self._appender = _head(claimed.lease)  # its run's first append: on the loop too
        return claimed

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        def job(db: sqlite3.Connection) -> Lease:
            now = self.clock()
            sid = sql.fence(db, lease)[0]
            db.execute(SQLITE.renew, (now + ttl, sid))
            return replace(lease, expires=now + ttl)

        return await self._call(job, write=True)

    async def release(self, lease: Lease, status: SessionStatus) -> None:
        def job(db: sqlite3.Connection) -> None:
            self._heads.pop(_head(lease), None)
            sid = sql.fence(db, lease)[0]
            db.execute(SQLITE.release, (status, sql.iso(self.clock()), sid))

        await self._briefly(job, write=True)
        self._waits.wake_controls(lease.key)  # its listener ends

    def append(self, lease: Lease, events: Sequence[ev.Event]) -> asyncio.Future[int]:
        """(A future, done already when the append ran on the event loop: awaiting it, or
        waiting for it, costs no task and no turn of the loop.)"""

        def job(db: sqlite3.Connection) -> int:
            known = self._heads.pop(head, None)
            at, tenant = sql.iso(self.clock()), lease.key.tenant
            new = None
            if known is not None:  # fenced by the row's update: no read first
                sid, state = known
                new = sql.commit(cursor, sid, tenant, state, events, at, epoch=lease.epoch)
            if new is None:  # unknown, or someone wrote since (or took the session over)
                sid, state = sql.fence(db, lease)
                new = sql.commit(cursor, sid, tenant, state, events, at)
                assert new is not None  # the row was just read in this transaction
            if len(self._heads) >= HEADS:
                self._heads.clear()
            self._heads[head] = (sid, new)
            return new.last_seq

        cursor = self._runner.cursor  # (the connection's, used by one thread at a time)
        head = _head(lease)
        alone, self._appender = self._appender == head, head
        try:
            if alone and self._now and not self._closed:
                done, last_seq = self._runner.now(job)  # on the loop, when nothing would wait
                if done:
                    self._waits.notify()
                    return _settled(last_seq)
            return self._submit(job, True)
        except Exception as exc:  # (raised when awaited, as from the worker)
            return _settled(None, exc)

    async def decide(self, tenant: str, pending_id: str, decision: Verdict) -> Decided:
        def job(db: sqlite3.Connection) -> Decided:
            at = sql.iso(self.clock())
            item, decided = sql.run(db, rm.decision(SQLITE, tenant, pending_id, decision, at))
            if decided is not None:
                sid = db.execute(
                    "SELECT session FROM pending WHERE id=?", (pending_id,)
                ).fetchone()[0]
                sql.commit(db, sid, tenant, sql.state(db, sid), decided, at)
                item = sql.run(db, rm.pending_item(SQLITE, tenant, pending_id))
            return Decided(
                decided is not None, item, sql.run(db, rm.open_in_batch(SQLITE, pending_id))
            )

        return await self._call(job, write=True)

    async def save_snapshot(self, lease: Lease, snapshot: Snapshot) -> None:
        def job(db: sqlite3.Connection) -> None:
            sid, state = sql.fence(db, lease)
            if not 0 <= snapshot.seq <= state.last_seq:
                raise StoreError(
                    f"session {lease.key.id}: a snapshot at seq {snapshot.seq} is past "
                    f"the log's end ({state.last_seq})"
                )
            at = sql.iso(self.clock())
            db.execute(SQLITE.save_snapshot, (sid, snapshot.seq, snapshot.data, at))

        await self._call(job, write=True)

    async def fork(self, source: SessionKey, at: int, new_id: str) -> SessionKey:
        return await self._program(forking.fork(source, at, new_id, self._clock), write=True)

    # ---- controls ----------------------------------------------------------------------------

    async def send_control(
        self, key: SessionKey, kind: ControlKind, text: str | None = None
    ) -> QueuedControl | None:
        sent = await self._call(lambda db: ctl.send(db, key, kind, text, self.clock()), write=True)
        if sent is not None:
            self._waits.wake_controls(key)
        return sent

    async def controls(self, lease: Lease) -> AsyncIterator[QueuedControl]:
        self._waits.start()
        try:
            while True:
                tick = self._waits.control_tick(lease.key)  # taken before reading
                if await self._call(lambda db: ctl.waiting(db, lease)):
                    taken = await self._call(
                        lambda db: ctl.take(db, lease, self.clock()), write=True
                    )
                    for control in taken:
                        yield control
                    continue
                await asyncio.shield(tick)
        finally:
            self._waits.stop()

    async def delivered(self, control: QueuedControl) -> bool:
        self._waits.start()
        try:
            while True:
                tick = self._waits.next_tick()
                state, holds = await self._call(lambda db: ctl.outcome(db, control, self.clock()))
                if state != "sent":
                    return state == "taken"
                if not holds:
                    return not await self.withdraw(control)
                await asyncio.shield(tick)
        finally:
            self._waits.stop()

    async def withdraw(self, control: QueuedControl) -> bool:
        return await self._call(lambda db: ctl.withdraw(db, control, self.clock()), write=True)

    # ---- the readers' side -------------------------------------------------------------------

    async def read(
        self, key: SessionKey, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        def job(db: sqlite3.Connection) -> list[StoredEvent]:
            return sql.run(db, rm.events(SQLITE, sql.session_id(db, key), after, limit))

        return await self._call(job)

    async def follow(self, key: SessionKey, *, after: int) -> AsyncIterator[StoredEvent]:
        self._waits.start()
        try:
            position = after
            while True:
                tick = self._waits.next_tick()  # taken before reading: no commit slips between
                batch = await self.read(key, after=position, limit=500)
                for stored in batch:
                    position = stored.seq
                    yield stored
                if not batch:
                    await asyncio.shield(tick)  # shared: a waiter cancelled leaves it be
        finally:
            self._waits.stop()

    async def wait_decided(self, tenant: str, pending_id: str) -> PendingRecord:
        self._waits.start()
        try:
            while True:
                tick = self._waits.next_tick()
                item = await self.pending_item(tenant, pending_id)
                if item.status != "open":
                    return item
                await asyncio.shield(tick)
        finally:
            self._waits.stop()

    async def attachments(self, hashes: Sequence[str]) -> dict[str, bytes]:
        return await self._program(lambda d: rm.attachments(d, hashes)) if hashes else {}

    async def snapshot(self, key: SessionKey) -> Snapshot | None:
        def job(db: sqlite3.Connection) -> Snapshot | None:
            return sql.run(db, rm.snapshot(SQLITE, sql.session_id(db, key)))

        return await self._call(job)

    async def session(self, key: SessionKey) -> SessionRecord:
        return await self._briefly(lambda db: sql.run(db, rm.session(SQLITE, key, self._clock)))

    async def sessions(
        self, tenant: str, agent: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> Page:
        return await self._program(
            lambda d: rm.sessions(d, tenant, agent, limit, cursor, self._clock)
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
        listed = rm.pending(SQLITE, tenant, agent, session, status, limit, cursor)
        return await self._briefly(lambda db: sql.run(db, listed))

    async def pending_item(self, tenant: str, pending_id: str) -> PendingRecord:
        return await self._briefly(
            lambda db: sql.run(db, rm.pending_item(SQLITE, tenant, pending_id))
        )

    async def usage(self, tenant: str, *, key: SessionKey | None = None) -> dict[str, Any]:
        return await self._program(lambda d: rm.usage(d, tenant, key))

    def outbox(self) -> SQLOutbox:
        """Its notifications' outbox (`store.outbox.outbox_of`)."""
        return SQLOutbox(self)

    async def usage_report(self, query: UsageQuery) -> Page:
        return await self._program(lambda d: report(d, query))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._runner.stop()
        self._waits.close()


def _settled(value: Any, error: BaseException | None = None) -> asyncio.Future[Any]:
    future = asyncio.get_running_loop().create_future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
    return future


def _head(lease: Lease) -> Head:
    key = lease.key
    return key.tenant, key.agent, key.id, lease.epoch
