"""Runs in progress in this process, and who is following their sessions.

Each run is driven by a task the runtime owns, so a follower that goes away (a closed stream, a
dropped request) never cancels it. A run keeps every event it emitted and fans them out to any
number of subscribers, each of which may join late and start after a sequence number: an event
carries its seq once the log holds it (token deltas and events not committed yet carry none).
Events others append to the session meanwhile (decisions) join the fan-out in log order.

Followers are counted per session: a run's live approver waits for a decision only while someone
follows the session, and defers (a durable pause) once the last follower has gone.

A run that lives past `listening.LISTEN_AFTER` listens for the controls other processes send
it, and applies each exactly as a control of this process (`LiveRun.apply`; see `listening`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from .. import events as ev
from ..errors import SessionBusy
from ..loop.session import Run, Session
from ..store import StaleWriter, StoredEvent
from ..store.log import QueuedControl, SessionKey, Store
from .follow import Followed, Item, follow
from .journal import NOT_STORED, LogJournal
from .lifecycle import Lifecycle
from .listening import Listener, Listeners

logger = logging.getLogger("loopwright.runtime")


class LiveRun:
    """One run in progress in this process: its session, its events so far, its subscribers."""

    def __init__(
        self,
        registry: Live,
        key: SessionKey,
        session: Session,
        run: Run,
        on_end: Callable[[LiveRun], Awaitable[None]] | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        journal = session.journal
        assert isinstance(journal, LogJournal)
        self.key = key
        self.session = session
        self.journal = journal
        self.items: list[ev.Event] = []
        self.done: ev.Done | None = None
        self.failure: BaseException | None = None
        """What ended the run without its `done` (a takeover, a failing log), if anything."""
        self.finished = asyncio.Event()
        self.waiting: set[str] = set()
        """Pending items a live approver of this run waits on right now."""
        self.deferred = False
        """A held approver of this run deferred (nobody followed it): it is pausing durably."""
        self.held: Follower | None = None
        """The follower counted for the caller from the start (`Runtime.send(hold=True)`)."""
        self._registry = registry
        self._run = run
        self._on_end = on_end
        self._foreign: list[StoredEvent] = []
        self._queues: set[asyncio.Queue[ev.Event | None]] = set()
        self._ended: list[Callable[[], None]] = []
        self._first: asyncio.Future[None] = loop.create_future()
        self._first.add_done_callback(_retrieve)
        self._listener: Listener | None = None
        journal.on_foreign = self._foreign_events
        self.task = loop.create_task(self._drive(), name=f"loopwright run {key.id}")

    @property
    def start_seq(self) -> int:
        """The log's last seq before this run's first event (once the run has its lease)."""
        return self.journal.start_seq

    def seq_of(self, event: ev.Event) -> int | None:
        """The event's seq, if the log holds it by now."""
        return self.journal.seqs.get(id(event))

    async def started(self) -> None:
        """Wait until the run's first events are in the log (its input is durable); raises
        what stopped it before (`SessionBusy` when another run holds the session, a
        `StaleWriter` when a paused run was finished elsewhere)."""
        await asyncio.shield(self._first)

    def stream(self) -> AsyncIterator[Item]:
        """This run's events from its start, then on across pauses up to a `done` that is not
        a pause (see `follow`); the follower of `hold` is this stream's, gone when it ends."""
        follower, self.held = self.held, None
        registry = self._registry
        return follow(
            registry.log, registry, self.key, after=self.start_seq, follower=follower, first=self
        )

    def detach(self) -> None:
        """Stop counting the caller of `hold` as a follower (when it will not stream)."""
        follower, self.held = self.held, None
        if follower is not None:
            follower.close()

    async def settled(self) -> None:
        """Wait until the run has its first events in the log, or has ended (whatever ended
        it is in `failure`)."""
        await asyncio.wait((self._first,))

    def when_finished(self, callback: Callable[[], None]) -> None:
        """Call `callback` as the run finishes (at once when it has): no task waits for it."""
        if self.finished.is_set():
            callback()
        else:
            self._ended.append(callback)

    async def wait(self) -> ev.Done | None:
        """Wait for the run's end: its `done`, or None when it ended without one."""
        await self.finished.wait()
        return self.done

    @property
    def taking(self) -> bool:
        """Its run still takes steering: it has not reached its `done`."""
        return not self._run.past_done

    def hurry(self) -> None:
        """A cancelled run records its end now, without waiting for late results (shutdown)."""
        self._run.hurry()

    async def _drive(self) -> None:
        try:
            items, queues, first = self.items, self._queues, self._first
            async for event in self._run:
                if self._foreign:  # (none, but after a foreign writer's commit)
                    self._publish_foreign()
                items.append(event)  # (`_publish`, inline: once an event)
                for queue in queues:
                    queue.put_nowait(event)
                if type(event) is ev.Done:
                    self.done = event
                if not first.done() and self._run.seq is not None:
                    first.set_result(None)
                    self._listen()
                    self._registry.lifecycle.ran(self.key, self.start_seq)
        except Exception as exc:
            self.failure = exc
            if not self._first.done():
                self._first.set_exception(exc)
            elif isinstance(exc, StaleWriter):  # taken over: it went on elsewhere
                logger.warning("run of session %s stopped: %s", self.key.id, exc)
            else:
                logger.error("run of session %s ended: %r", self.key.id, exc)
        except BaseException:
            self._first.cancel()
            raise
        finally:
            self._publish_foreign()
            if not self._first.done():
                self._first.set_result(None)
            self._registry.listeners.ending(self._listener)
            # (let go of what holds this run: its journal's callback and its listener's task,
            # whose end would keep this run in a cycle that only the collector frees)
            if self.journal.on_foreign == self._foreign_events:  # (not a later run's)
                self.journal.on_foreign = None
            self._listener = None
            self.finished.set()
            for queue in self._queues:
                queue.put_nowait(None)
            ended, self._ended = self._ended, []
            for callback in ended:
                try:
                    callback()
                except Exception:
                    logger.exception("as the run of session %s finished", self.key.id)
            self._registry.forget(self)
            self._registry.lifecycle.ended(self.key, self.done, self.failure)
        if self._on_end is not None:
            try:
                await self._on_end(self)
            except Exception:
                logger.exception("after the run of session %s", self.key.id)

    def _listen(self) -> None:
        lease = self.journal.lease
        if lease is not None:
            self._listener = Listener(self._registry.log, lease, self)

    def apply(self, control: QueuedControl) -> None:
        """A control, exactly as this process's own: cancel, or queue a steer or follow-up (one
        refused as a cancelled run ends: its sender learns so from the run's `done`)."""
        try:
            if control.kind == "cancel":
                self.session.cancel()
            elif control.kind == "steer":
                self.session.steer(control.text or "")
            else:
                self.session.follow_up(control.text or "")
        except SessionBusy as exc:
            logger.info("session %s: %s", self.key.id, exc)

    def _publish(self, event: ev.Event) -> None:
        self.items.append(event)
        for queue in self._queues:
            queue.put_nowait(event)

    def _foreign_events(self, stored: list[StoredEvent]) -> None:
        self._foreign += stored  # published before the run's next event, in log order

    def _publish_foreign(self) -> None:
        foreign, self._foreign = self._foreign, []
        for stored in foreign:
            self._publish(stored.event)

    async def subscribe(self, after: int) -> AsyncIterator[tuple[int | None, ev.Event]]:
        """The run's events past seq `after` (from its start when `after` is older), then the
        live ones until it ends. A token delta comes only once an event past `after` did: a
        follower resuming mid-reply does not get deltas twice (`message:completed` carries the
        whole text)."""
        queue: asyncio.Queue[ev.Event | None] = asyncio.Queue()
        backlog = list(self.items)
        if self.finished.is_set():
            queue.put_nowait(None)
        else:
            self._queues.add(queue)
        passed = False
        try:
            for event in backlog:
                seq, passed, show = self._position(event, after, passed)
                if show:
                    yield seq, event
            while (latest := await queue.get()) is not None:
                seq, passed, show = self._position(latest, after, passed)
                if show:
                    yield seq, latest
        finally:
            self._queues.discard(queue)

    def _position(self, event: ev.Event, after: int, passed: bool) -> tuple[int | None, bool, bool]:
        seq = self.seq_of(event)
        if seq is not None:
            return seq, seq > after, seq > after
        if event.type in NOT_STORED:
            return None, passed, passed
        return None, True, True  # not committed yet: it will come after anything committed


class Follower:
    """One follower of a session, counted until `close()`."""

    def __init__(self, registry: Live, key: SessionKey) -> None:
        self.key = key
        self._registry: Live | None = registry

    def close(self) -> None:
        registry, self._registry = self._registry, None
        if registry is not None:
            registry._detach(self.key)


class Live:
    """The registry of this process's live runs and of the followers of sessions."""

    def __init__(self, log: Store) -> None:
        self.log = log
        self._runs: dict[SessionKey, LiveRun] = {}
        self._followers: dict[SessionKey, int] = {}
        self._gone: dict[SessionKey, asyncio.Future[None]] = {}
        self._starts: dict[SessionKey, asyncio.Future[Followed]] = {}
        self.listeners = Listeners()
        """Listeners for controls of runs that ended, still ending."""
        self.lifecycle = Lifecycle()
        """The statuses of the sessions this process holds, published (`lifecycle`)."""
        self._closing = False

    def get(self, key: SessionKey) -> LiveRun | None:
        return self._runs.get(key)

    def check_idle(self, key: SessionKey) -> None:
        if key in self._runs:
            raise SessionBusy(f"session {key.id} is running: wait for its run to finish")

    def start(
        self,
        key: SessionKey,
        session: Session,
        run: Run,
        on_end: Callable[[LiveRun], Awaitable[None]] | None = None,
    ) -> LiveRun:
        """Drive `run` in a task of its own (`SessionBusy` when one of the session runs)."""
        self.check_idle(key)
        live = self._runs[key] = LiveRun(self, key, session, run, on_end)
        start = self._starts.pop(key, None)
        if start is not None and not start.done():
            start.set_result(live)
        return live

    def forget(self, live: LiveRun) -> None:
        if self._runs.get(live.key) is live:
            del self._runs[live.key]

    def started(self, key: SessionKey) -> asyncio.Future[Followed]:
        """Completes, with the run, when a run of the session starts here (from now on)."""
        future = self._starts.get(key)
        if future is None or future.done():
            future = self._starts[key] = asyncio.get_running_loop().create_future()
        return future

    def attach(self, key: SessionKey) -> Follower:
        self._followers[key] = self._followers.get(key, 0) + 1
        return Follower(self, key)

    def followers(self, key: SessionKey) -> int:
        """Followers of the session (none counted once the runtime closes)."""
        return 0 if self._closing else self._followers.get(key, 0)

    def gone(self, key: SessionKey) -> asyncio.Future[None]:
        """Completes when the session's last follower has gone."""
        future = self._gone.get(key)
        if future is None or future.done():
            future = self._gone[key] = asyncio.get_running_loop().create_future()
        return future

    def _detach(self, key: SessionKey) -> None:
        count = self._followers.get(key, 0) - 1
        if count > 0:
            self._followers[key] = count
            return
        self._followers.pop(key, None)
        gone = self._gone.pop(key, None)
        if gone is not None and not gone.done():
            gone.set_result(None)

    async def stop_all(self, timeout: float = 5.0) -> None:
        """Stop every live run and wait (bounded) for each to record its end. A run waiting
        for a decision on a held stream is not cancelled (that would close its item): it
        stops being followed, and pauses durably as if its holder had gone; the others are
        cancelled."""
        self._closing = True
        runs = list(self._runs.values())
        for gone in self._gone.values():
            if not gone.done():
                gone.set_result(None)  # held approvers defer
        self._gone.clear()
        asking = [live.task for live in runs if live.waiting or live.deferred]
        if asking:
            await asyncio.wait(asking, timeout=timeout)
        for live in runs:
            if not live.finished.is_set():
                live.session.cancel()
        tasks = [live.task for live in runs]
        if tasks:
            _, stragglers = await asyncio.wait(tasks, timeout=timeout)
            if stragglers:  # still ending (threads within their grace): they record it now
                for live in runs:
                    if live.task in stragglers:
                        live.hurry()
                _, stragglers = await asyncio.wait(stragglers, timeout=timeout)
            for task in stragglers:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*stragglers, return_exceptions=True)
        await self.listeners.stop()
        self.lifecycle.close()


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # marks it retrieved; the waiter re-raises it
