"""WAL checkpoints off the commit path, for `SQLiteLog`.

In WAL mode a commit appends its pages to the `-wal` file; a *checkpoint* copies them back into
the database and syncs both files. SQLite runs one inside the commit that takes the WAL past
1,000 pages, so one append in a few hundred waited 20–25 ms for it (more than the other appends
of a 500-step run together spent committing). Here a thread of the log's own, on a connection of
its own, runs a passive checkpoint every `every` write commits instead: appends never wait for
it, and it never waits for them (the log's connection runs none: `wal_autocheckpoint=0`). A
commit is as durable either way (the WAL is the log; with `synchronous=NORMAL` a commit is never
synced, with `FULL` always, by the committing connection); the checkpoint syncs at the log's own
level.

A passive checkpoint copies the pages committed before it started, and the WAL starts over only
once all of them are copied: under writes that never pause, it keeps growing. Once it holds
`net` pages after a passive checkpoint, the thread runs a full one, which waits for the write
lock and holds it while it copies the rest (about 10 ms here): appends wait for it then, on the
log's worker thread, once per `net` pages at most.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger("loopwright.store")


class Checkpointer:
    """Passive checkpoints of one database file on a daemon thread, started at the first."""

    def __init__(
        self, path: Path, synchronous: str, *, every: int = 128, net: int = 4000, wait: float = 5
    ) -> None:
        """`wait`: seconds a full checkpoint waits for the write lock."""
        self.path, self.synchronous, self.every, self.net, self.wait = (
            path,
            synchronous,
            every,
            net,
            wait,
        )
        self.full = 0
        """Full checkpoints run (tests)."""
        self.done = 0
        self.ran = threading.Event()
        """Checkpoints run, and set after each (tests)."""
        self._commits = 0
        self._due = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """Count one write commit (called by the log's worker thread)."""
        self._commits += 1
        if self._commits >= self.every and not self._closing:
            self._commits = 0
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"loopwright checkpoints {self.path.name}", daemon=True
                )
                self._thread.start()
            self._due.set()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it runs, if any) and close its connection."""
        self._closing = True
        self._due.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=self.wait)
        try:
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            while True:
                self._due.wait()
                self._due.clear()
                if self._closing:
                    return
                try:
                    _, pages, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if pages >= self.net and copied < pages:
                        db.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
                        self.full += 1
                    self.done += 1
                    self.ran.set()
                except sqlite3.Error as exc:  # another checkpoint runs; the next one will do
                    logger.debug("%s: checkpoint skipped: %s", self.path, exc)
        finally:
            with contextlib.suppress(sqlite3.Error):
                db.close()
