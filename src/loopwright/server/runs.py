"""Runs in progress in this server.

Each run is driven by a task the server owns, so a client that goes away (a closed SSE stream,
a dropped request) never cancels it. The run keeps every event it emitted with its sequence
number in the session's log (token deltas are not logged and have none) and fans them out to any
number of subscribers, each of which may join late and start after a sequence number.

One run per (tenant, session) here; across processes the store's claim keeps it one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from .. import events as ev
from ..errors import SessionBusy
from ..session import Run, Session
from ..store.durable import DurableJournal

log = logging.getLogger("loopwright.server")

Key = tuple[str, str]
"""(tenant, session id)."""


@dataclass(frozen=True, slots=True)
class Item:
    """One event of a live run and its sequence number in the log (None for token deltas)."""

    seq: int | None
    event: ev.Event


class LiveRun:
    """One run in progress: its session, the events so far, and the subscribers' queues."""

    def __init__(self, runs: Runs, key: Key, session: Session, run: Run) -> None:
        loop = asyncio.get_running_loop()
        self.key = key
        self.session = session
        self.items: list[Item] = []
        self.base: int | None = None
        """The log's last sequence number before this run's first event."""
        self.done: ev.Done | None = None
        self.failure: BaseException | None = None
        """What ended the run without its `done` (a store failure), if anything did."""
        self.finished = asyncio.Event()
        self._runs = runs
        self._queues: set[asyncio.Queue[Item | None]] = set()
        self._started: asyncio.Future[None] = loop.create_future()
        self._started.add_done_callback(_retrieve)
        self.task = loop.create_task(self._drive(run), name=f"loopwright run {key[1]}")

    async def started(self) -> None:
        """Wait until the run's first events are committed (its input is in the log); raises
        what stopped the run before (`SessionBusy` when another process holds the session,
        `UnknownSession` for another tenant's id)."""
        await asyncio.shield(self._started)

    async def _drive(self, run: Run) -> None:
        journal = self.session.journal
        assert isinstance(journal, DurableJournal)
        try:
            async for event in run:
                item = Item(run.seq, event)  # its sequence number in the log (None: not logged)
                if self.base is None:
                    self.base = (item.seq or 1) - 1
                self.items.append(item)
                for queue in self._queues:
                    queue.put_nowait(item)
                if isinstance(event, ev.Done):
                    self.done = event
                if not self._started.done() and item.seq and journal.committed(item.seq):
                    self._started.set_result(None)  # an answer now acknowledges a logged run
        except Exception as exc:
            if not self._started.done():
                self._started.set_exception(exc)
            else:
                self.failure = exc
                log.error("run of session %s failed: %r", self.key[1], exc)
        except BaseException:
            self._started.cancel()
            raise
        finally:
            self.finished.set()
            for queue in self._queues:
                queue.put_nowait(None)
            self._runs.forget(self)

    async def follow(
        self, after: int | None = None, *, keepalive: float = 15.0
    ) -> AsyncIterator[Item | None]:
        """The run's events from its start (or those after sequence number `after`), then the
        live ones until it ends. Yields None after `keepalive` seconds of silence.

        After `after`, a token delta is sent only once a logged event past `after` was: a
        client resuming mid-reply does not get deltas twice (the reply's `message:completed`
        carries its whole text)."""
        queue: asyncio.Queue[Item | None] = asyncio.Queue()
        snapshot = list(self.items)
        if self.finished.is_set():
            queue.put_nowait(None)
        else:
            self._queues.add(queue)
        position = self.base or 0
        try:
            for item in snapshot:
                if item.seq is not None:
                    position = item.seq
                if after is None or position > after:
                    yield item
            while True:
                try:
                    next_item = await asyncio.wait_for(queue.get(), keepalive)
                except TimeoutError:
                    yield None
                    continue
                if next_item is None:
                    return
                if next_item.seq is not None:
                    position = next_item.seq
                if after is None or position > after:
                    yield next_item
        finally:
            self._queues.discard(queue)

    def stored_events(self) -> list[ev.Event]:
        """The run's events that the log holds (every one but token deltas)."""
        return [item.event for item in self.items if item.seq is not None]


class Runs:
    """The registry of this server's live runs, by tenant and session."""

    def __init__(self) -> None:
        self._live: dict[Key, LiveRun] = {}

    def get(self, tenant: str, session_id: str) -> LiveRun | None:
        return self._live.get((tenant, session_id))

    def check_idle(self, tenant: str, session_id: str) -> None:
        if (tenant, session_id) in self._live:
            raise SessionBusy(f"session {session_id} is running: wait for its run to finish")

    def start(self, session: Session, run: Run) -> LiveRun:
        """Drive `run` in a server-owned task (call `check_idle` first)."""
        key = (session.tenant, session.id)
        self.check_idle(*key)
        live = LiveRun(self, key, session, run)
        self._live[key] = live
        return live

    def forget(self, live: LiveRun) -> None:
        if self._live.get(live.key) is live:
            del self._live[live.key]

    async def stop_all(self, timeout: float = 5.0) -> None:
        """Cancel every live run and wait (bounded) for each to record its end."""
        live = list(self._live.values())
        for run in live:
            run.session.cancel()
        tasks = [run.task for run in live]
        if not tasks:
            return
        _, stragglers = await asyncio.wait(tasks, timeout=timeout)
        for task in stragglers:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*stragglers, return_exceptions=True)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # marks it retrieved; the waiter re-raises it
