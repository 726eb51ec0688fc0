"""The PostgreSQL event log's connections: a `psycopg_pool.AsyncConnectionPool` opened on first
use (in the event loop that uses it, the schema created or migrated first: `pg_schema`), the
listening connection's wake-ups (`pg_listen`), and how a job runs on a pooled connection.

A job runs to its end even if its caller is cancelled (as on SQLite); a write runs in one
transaction, pipelined: BEGIN goes with the session row's lock, COMMIT and the notifications
with the writes — two round trips. psycopg's errors become `StoreError`s naming the database
(never its password): for the operator's log, not for clients (`server.app` answers them with a
short 503).

A database that is down fails fast: a job waits at most `connect_timeout` seconds (about a
second) for a connection, not psycopg_pool's 30 s, and the pool does not back off between
reconnection attempts (psycopg_pool's backoff grows to minutes): each job that finds no
connection has one attempted, so the first job after the server is back is served.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from .pg_listen import CONTROL, EVENTS, TAKEN, Wakeups, channel
from .pg_rows import Db
from .pg_schema import migrate
from .records import StoreError

T = TypeVar("T")
CONNECT_TIMEOUT = 1.0
"""Seconds a job waits for a connection (or the first connection is waited for) by default."""
Told = list[tuple[int, str]]
"""What a write tells once it committed: (session key, payload after the key) — the session's
last seq for appended events (`pg_listen`)."""


class Database:
    """The pool and the wake-ups of one `PostgresLog` (see the module docstring)."""

    def __init__(
        self,
        conninfo: str,
        where: str,
        *,
        pool_size: int,
        recheck: float,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.conninfo, self.where = conninfo, where
        self.pool_size, self.recheck = pool_size, recheck
        self.connect_timeout = connect_timeout
        """Seconds a job waits for a connection before it fails (`StoreError`)."""
        self.pool: AsyncConnectionPool | None = None
        self.wakeups: Wakeups | None = None
        """Wake-ups for appended events (`follow`, `wait_decided`)."""
        self.controls: Wakeups | None = None
        """Wake-ups for controls, on a channel of their own: a process whose runs listen for
        controls does not hear every commit of the database."""
        self._opening: asyncio.Future[AsyncConnectionPool] | None = None
        self._jobs: set[asyncio.Future[Any]] = set()
        self.closed = False

    async def ready(self) -> AsyncConnectionPool:
        if self.closed:
            raise StoreError(f"{self.where}: the log is closed")
        if self.pool is not None:
            return self.pool
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._connect())
            self._opening.add_done_callback(settled)
        opening = self._opening
        try:
            return await asyncio.shield(opening)
        except BaseException:
            if opening.done() and self._opening is opening:
                self._opening = None  # the next call tries again
            raise

    async def _connect(self) -> AsyncConnectionPool:
        try:
            async with asyncio.timeout(self.connect_timeout):
                first = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            async with first as db:
                schema = await migrate(db, self.where)
        except TimeoutError:
            raise StoreError(
                f"{self.where}: cannot open the event log: no connection within "
                f"{self.connect_timeout:.2f} sec"
            ) from None
        except psycopg.Error as exc:
            raise StoreError(f"{self.where}: cannot open the event log: {exc}") from None
        pool = AsyncConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=self.pool_size,
            kwargs={"autocommit": True},
            open=False,
            name="loopwright",
            timeout=self.connect_timeout,  # a job waits this long for a connection, then fails
            reconnect_timeout=0,  # no backoff: a job that finds no connection has one tried
        )
        await pool.open()
        self.wakeups = Wakeups(self.conninfo, channel(schema), recheck=self.recheck)
        self.controls = Wakeups(self.conninfo, channel(schema, "controls"), recheck=self.recheck)
        self.pool = pool
        return pool

    async def listening(self, about: str = EVENTS) -> Wakeups:
        """The wake-ups for events (or, with `about` CONTROL, for controls), listening."""
        await self.ready()
        wakeups = self._about(about)
        await wakeups.start()
        return wakeups

    def _about(self, payload: str) -> Wakeups:
        wakeups = self.controls if payload in (CONTROL, TAKEN) else self.wakeups
        assert wakeups is not None
        return wakeups

    async def run(
        self, job: Callable[[Db], Awaitable[T]], *, write: bool = False, told: Told | None = None
    ) -> T:
        """`job` on a pooled connection (in one transaction if `write`), run to its end even
        if the caller is cancelled. What a write's job adds to `told` is notified once it
        committed, and this process's waiters on it are woken at once."""
        pool = await self.ready()
        task = asyncio.ensure_future(self._on(pool, job, write, [] if told is None else told))
        self._jobs.add(task)
        task.add_done_callback(settled)
        task.add_done_callback(self._jobs.discard)
        try:
            result = await asyncio.shield(task)
        except BaseException:
            del task  # (the error's traceback holds this frame, and the task the error: a cycle)
            raise
        for sid, payload in told or ():
            self._about(payload).heard(f"{sid} {payload}")
        return result

    async def _on(
        self, pool: AsyncConnectionPool, job: Callable[[Db], Awaitable[T]], write: bool, told: Told
    ) -> T:
        tries = self.pool_size + 1
        try:
            for attempt in range(1, tries + 1):
                sent: list[bool] = []
                async with pool.connection() as db:
                    try:
                        return await (self._write(db, job, told, sent) if write else job(db))
                    except psycopg.OperationalError:
                        if not db.closed or sent or attempt == tries:
                            raise
                # a connection the pool kept was broken (the server restarted): nothing of the
                # job was committed, so it runs again on another (the pool drops this one)
            raise AssertionError("unreachable")
        except psycopg.Error as exc:
            raise StoreError(f"{self.where}: {exc}") from None

    async def _write(
        self, db: Db, job: Callable[[Db], Awaitable[T]], told: Told, sent: list[bool]
    ) -> T:
        """`job` in one transaction; `sent` once its COMMIT may have reached the server."""
        committed = None
        try:
            # pipelined: BEGIN goes with the row's lock, COMMIT and the notifications with the
            # writes: two round trips (psycopg's transaction() would take five)
            async with db.pipeline():
                await db.execute("BEGIN")
                result = await job(db)
                sent.append(True)
                committed = await db.execute("COMMIT")
                if told:
                    await self._tell(db, told)
        except psycopg.Error:
            if committed is None or committed.statusmessage != "COMMIT":
                raise
            # committed; only its notifications failed: followers re-read in a while
        finally:
            if not db.closed and db.info.transaction_status != TransactionStatus.IDLE:
                await db.execute("ROLLBACK")  # the job failed: nothing of it stays
        return result

    async def _tell(self, db: Db, told: Told) -> None:
        """NOTIFY after the commit, in a transaction of its own (the pipeline's implicit one)
        that does not wait for the disk: notifying holds a database-wide lock until its
        transaction ends, and notifying inside the write would serialise every commit on its
        flush (half the commits per second with eight writers, measured). A notification lost
        in a crash is made up by the re-reads."""
        for sid, payload in told:
            await db.execute(
                "SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)",
                (self._about(payload).channel, f"{sid} {payload}"),
            )

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._opening is not None and self.pool is None:
            with contextlib.suppress(Exception):
                await self._opening
        if self._jobs:
            await asyncio.gather(*self._jobs, return_exceptions=True)
        for wakeups in (self.wakeups, self.controls):
            if wakeups is not None:
                await wakeups.close()
        if self.pool is not None:
            await self.pool.close()


def settled(task: asyncio.Future[Any]) -> None:
    """A job (or the connecting) whose caller was cancelled: its failure is nobody's to hear."""
    if not task.cancelled():
        task.exception()
