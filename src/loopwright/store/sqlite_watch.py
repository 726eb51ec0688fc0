"""What the SQLite log's waiters wait on: the log's next commit, and controls sent to a session.

A waiter takes the next wake-up (`next_tick`, `control_tick`) *before* it reads, so a commit
either is in what it reads or wakes it after. This log's own commits wake the commit waiters at
once (the worker calls `notify`); another process's are seen by a task that looks at `PRAGMA
data_version` every `poll_interval` seconds while anyone waits (`start`/`stop`). The same look
finds the rows added to `controls` since the last one and wakes only the listeners of the
sessions they went to: a run's own appends never wake its listener for controls.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

from . import sqlite_controls as ctl
from . import sqlite_rows as sql
from .log import SessionKey
from .records import StoreError

Submit = Callable[[Callable[[sqlite3.Connection], Any], bool], "asyncio.Future[Any]"]


class Watch:
    def __init__(self, submit: Submit, poll_interval: float) -> None:
        self.submit, self.poll_interval = submit, poll_interval
        self.poller: asyncio.Task[None] | None = None
        self._tick: asyncio.Future[None] | None = None
        self._waiting = 0
        self._control_ticks: dict[SessionKey, asyncio.Future[None]] = {}
        self._control_high: int | None = None
        """The last control row looked at (on the worker thread only)."""

    def notify(self) -> None:
        """Wake the commit waiters (a commit of this log, or one seen from another process)."""
        tick, self._tick = self._tick, None
        if tick is not None and not tick.done():
            tick.set_result(None)

    def next_tick(self) -> asyncio.Future[None]:
        """Completes at the next commit (of this log, or seen from another process)."""
        loop = asyncio.get_running_loop()
        if self._tick is None or self._tick.get_loop() is not loop:
            self._tick = loop.create_future()
        return self._tick

    def control_tick(self, key: SessionKey) -> asyncio.Future[None]:
        """Completes when a control may have been sent to the session's run (or its lease was
        released here)."""
        tick = self._control_ticks.get(key)
        if tick is None or tick.done():
            tick = self._control_ticks[key] = asyncio.get_running_loop().create_future()
        return tick

    def wake_controls(self, key: SessionKey | None = None) -> None:
        """Wake the session's control listeners (every session's when None)."""
        if key is None:
            ticks, self._control_ticks = list(self._control_ticks.values()), {}
        else:
            tick = self._control_ticks.pop(key, None)
            ticks = [] if tick is None else [tick]
        for tick in ticks:
            if not tick.done():
                tick.set_result(None)

    def start(self) -> None:
        """One more waiter: the look at other processes' commits runs while there is one."""
        self._waiting += 1
        if self.poller is None or self.poller.done():
            # the baseline is queued now, before the waiter's first read
            baseline = self.submit(sql.data_version, False)
            self.poller = asyncio.get_running_loop().create_task(self._poll(baseline))

    def stop(self) -> None:
        self._waiting -= 1

    def close(self) -> None:
        if self.poller is not None:
            self.poller.cancel()
        self.notify()
        self.wake_controls()

    async def _poll(self, baseline: asyncio.Future[int]) -> None:
        try:
            version = await baseline
            while self._waiting > 0:
                await asyncio.sleep(self.poll_interval)
                if self._waiting <= 0:
                    break
                now, sent_to = await self.submit(self._probe, False)
                if now != version:
                    version = now
                    self.notify()
                if sent_to is None:
                    self.wake_controls()
                for key in sent_to or ():
                    self.wake_controls(key)
        except StoreError:  # closed: the waiters learn it from their next read
            self.notify()
            self.wake_controls()

    def _probe(self, db: sqlite3.Connection) -> tuple[int, set[SessionKey] | None]:
        """The data version, and the sessions new controls went to (None: maybe any)."""
        version = sql.data_version(db)
        if not self._control_ticks:
            return version, set()
        self._control_high, sent_to = ctl.sent_since(db, self._control_high)
        return version, sent_to
