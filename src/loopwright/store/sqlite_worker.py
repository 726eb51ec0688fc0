"""The SQLite log's worker: one thread with the log's one connection, running its calls in order.

A call is a function of the connection, handed over with `submit` and answered on its caller's
event loop. A *write* is run inside a write transaction (`BEGIN IMMEDIATE`) that the worker opens
and commits; writes that are waiting when one starts share its transaction — a group commit —,
each in a savepoint of its own, so one that fails (a stale lease, a busy session) undoes only
its own part. Every caller of a group is answered once the group's COMMIT returned, so no
caller learns a seq before its events are committed; a COMMIT that fails fails them all. Reads
run one by one, in turn with the writes.

`now` runs a call on the calling thread instead — the event loop's — when that cannot wait:
the worker is idle (nothing runs or is queued) and, for a write, SQLite's write lock is free (it
is taken without waiting, or the write goes to the worker, which waits for it; a read that finds
the database locked goes there too: `now` turns the connection's busy timeout off and the
thread turns it back on, each only when the other ran last, so a run's calls in a row pay for
neither), and a commit neither syncs (`synchronous=NORMAL`; the log does not ask for it
otherwise) nor checkpoints (the connection never does; `sqlite_checkpoints`). What is left is
the call's own work, about 0.1–0.2 ms for an append, which a hand-over to the thread and back
costs about as much again; see bench/DURABLE.md.

SQLite errors become `StoreError`s naming the file.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .records import StoreError
from .sqlite_checkpoints import Checkpointer

GROUP = 64
"""Writes at most per transaction."""


@dataclass(slots=True)
class DbJob:
    fn: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any] | None
    """(None once answered: an error's traceback holds the worker's frames, which hold the job;
    a job that kept its future, which holds the error, would make a cycle)"""
    write: bool


Answer = tuple[DbJob, Any, BaseException | None]


class Worker:
    def __init__(
        self,
        db: sqlite3.Connection,
        path: Path,
        checkpoints: Checkpointer,
        committed: Callable[[], None],
        busy_timeout: float,
    ) -> None:
        """`committed` runs on the callers' loop after each commit (before they are answered)."""
        self.db, self.path, self.checkpoints, self.committed = db, path, checkpoints, committed
        self.busy_ms = int(busy_timeout * 1000)
        self.cursor = db.cursor()
        """One cursor for the statements every write runs (BEGIN, COMMIT, an append's): no
        cursor made and registered with the connection for each."""
        self._busy = threading.Lock()
        """Held while the connection is in use (by the thread, or by `now`)."""
        self._waiting = True
        """Whether the connection waits for a lock held elsewhere (`busy_timeout`): `now`
        turns that off, the thread back on, each only when the other ran last."""
        self.transactions = 0
        """Write transactions committed (tests)."""
        self._jobs: queue.SimpleQueue[DbJob | None] = queue.SimpleQueue()
        self._end: DbJob | None = None
        self.thread = threading.Thread(
            target=self._work, name=f"loopwright log {path.name}", daemon=True
        )
        self.thread.start()

    def submit(self, fn: Callable[[sqlite3.Connection], Any], write: bool) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put(DbJob(fn, loop, future, write))
        return future

    def now(self, fn: Callable[[sqlite3.Connection], Any], write: bool = True) -> tuple[bool, Any]:
        """Run `fn` on this thread if nothing has to wait for it (see the module docstring):
        (True, its value), or (False, None) and the caller submits it. A write runs in its own
        transaction; a read that finds the database locked goes to the worker too. Its error
        is raised here."""
        if not self._busy.acquire(blocking=False):
            return False, None
        try:
            if not self._jobs.empty():
                return False, None
            db = self.db
            if self._waiting:
                db.execute("PRAGMA busy_timeout=0")
                self._waiting = False
            if write:
                try:
                    self.cursor.execute("BEGIN IMMEDIATE")
                except sqlite3.Error:  # the lock is held elsewhere: the worker waits for it
                    return False, None
                job = DbJob(fn, None, None, True)  # type: ignore[arg-type]  # answered here
                ((_, value, error),) = self._transacted([job])
            else:
                try:
                    value, error = fn(db), None
                except Exception as exc:
                    if isinstance(exc, sqlite3.OperationalError) and _locked(exc):
                        return False, None  # (a recovery elsewhere, for a moment: it waits)
                    value, error = None, self._error(exc)  # (as the worker's `_read` answers)
        finally:
            self._busy.release()
        if error is not None:
            try:
                raise error
            finally:  # (the frame, on the error's traceback, must not hold it: a cycle)
                error = None
        return True, value

    def stop(self) -> asyncio.Future[Any]:
        """End the thread once the calls handed over before ran; the future is done once the
        connection (and the checkpoints' thread) closed."""
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        self._end = DbJob(lambda db: None, loop, ended, False)
        self._jobs.put(None)
        return ended

    # ---- on the worker thread ----------------------------------------------------------------

    def _work(self) -> None:
        later: collections.deque[DbJob | None] = collections.deque()
        while (job := later.popleft() if later else self._jobs.get()) is not None:
            with self._busy:
                if not self._waiting:
                    self.db.execute(f"PRAGMA busy_timeout={self.busy_ms}")
                    self._waiting = True
                if not job.write:
                    answers = [self._read(job)]
                else:
                    group = [job]
                    while len(group) < GROUP and not later:
                        try:
                            following = self._jobs.get_nowait()
                        except queue.Empty:
                            break
                        if following is not None and following.write:
                            group.append(following)
                        else:
                            later.append(following)  # a read (or the end) waits for the group
                    answers = self._transact(group)
            self._answer(answers)
        with self._busy:
            self.checkpoints.close()
            self.db.close()
        if self._end is not None:
            self._answer([(self._end, None, None)])

    def _read(self, job: DbJob) -> Answer:
        try:
            return job, job.fn(self.db), None
        except BaseException as exc:  # handed to the caller
            return job, None, self._error(exc)

    def _transact(self, group: list[DbJob]) -> list[Answer]:
        try:
            self.cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            hint = " (another process holds the write lock)" if "locked" in str(exc) else ""
            failed = StoreError(f"{self.path}: {exc}{hint}")
            return [(job, None, failed) for job in group]
        return self._transacted(group)

    def _transacted(self, group: list[DbJob]) -> list[Answer]:
        """Run the group inside the transaction just begun, and commit it."""
        db, alone = self.db, len(group) == 1
        answers: list[Answer] = []
        for job in group:
            try:
                if not alone:
                    db.execute("SAVEPOINT job")
                value = job.fn(db)
                if not alone:
                    db.execute("RELEASE job")
                answers.append((job, value, None))
            except BaseException as exc:
                error = self._error(exc)
                if alone or not self._undo(db):  # the whole transaction is lost
                    return self._rollback(group, error)
                answers.append((job, None, error))
        try:
            self.cursor.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            return self._rollback(group, self._error(exc))
        self.transactions += 1
        self.checkpoints.committed()
        return answers

    def _undo(self, db: sqlite3.Connection) -> bool:
        """Undo one job of a group (its savepoint); False when the transaction is gone."""
        try:
            db.execute("ROLLBACK TO job")
            db.execute("RELEASE job")
        except sqlite3.DatabaseError:
            return False
        return db.in_transaction

    def _rollback(self, group: list[DbJob], error: BaseException) -> list[Answer]:
        with contextlib.suppress(sqlite3.DatabaseError):
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        return [(job, None, error) for job in group]

    def _error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, sqlite3.DatabaseError):
            return StoreError(f"{self.path}: {exc}")
        return exc

    def _answer(self, answers: list[Answer]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Answer]] = {}
        for answer in answers:
            by_loop.setdefault(answer[0].loop, []).append(answer)
        for loop, some in by_loop.items():
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody is left to tell
                loop.call_soon_threadsafe(self._settle, some)

    # ---- on the callers' loop ----------------------------------------------------------------

    def _settle(self, answers: list[Answer]) -> None:
        if any(job.write and error is None for job, _, error in answers):
            self.committed()
        for job, value, error in answers:
            future, job.future = job.future, None
            if future is None or future.cancelled():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)


def _locked(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED, extended codes included."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
