"""What a journal commits, and when: the events never stored, the commit points, the settings
a runtime's journals write with, the crash points tests set (`LOOPWRIGHT_CRASH_AFTER`), and how
a journal commits what it buffered (`Committing`, the base of `journal.LogJournal`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..errors import CommitFailed, describe
from ..loop.observers import Observer
from ..state.text import valid, valid_data
from ..store import StaleWriter, StoredEvent, StoreError
from ..store.log import EncodedEvents, Lease, SessionKey, Store
from ..toolsets import Toolsets
from ..wire import dumps

logger = logging.getLogger("loopwright.runtime")

NOT_STORED = frozenset({"text:delta", "thinking:delta", "tool:delta"})
COMMIT_AT = frozenset(
    {  # (a reply, `message:completed`, is committed with what follows it: `Committing.encode`)
        "input:received",
        "steering:injected",
        "pending:requested",  # with its item's announcement: seen (and decided) once both are in
        "tool:started",
        "tool:result",
        "tool:late_result",
        "run:interrupted",
        "compaction:finished",
        "done",  # with the terminal event just before it: nothing runs between the two
    }
)
FORWARDED_AT = frozenset({"approval:pending", "question:pending"})
"""A subagent's events its parent's log commits at: the items a human answers, so the parent's
log holds one before its stream shows it (with its seq) and before anyone decides it; what
follows a decision in that log never repeats it."""


def commits(event: ev.Event) -> bool:
    """Whether a journal commits once it has appended `event` (a commit point)."""
    if isinstance(event, ev.SubagentEvent):
        return forwarded(event).type in FORWARDED_AT
    return event.type in COMMIT_AT


def forwarded(event: ev.SubagentEvent) -> ev.Event:
    """The subagent's own event `event` forwards (a grandchild's is forwarded twice)."""
    inner = event.event
    while isinstance(inner, ev.SubagentEvent):
        inner = inner.event
    return inner


CRASH_ENV = "LOOPWRIGHT_CRASH_AFTER"
"""Tests only: `type[#n][,…]` kills the process right after the n-th commit holding that type
(counted over every journal of the process: a subagent's commits count with its parent's)."""
LEASE_ENV = "LOOPWRIGHT_LEASE_SECONDS"
"""Tests only: overrides the length of every lease the store records (a process about to be
killed leaves one that expires at once); a run's own deadline stays its `ttl`."""


def new_owner() -> str:
    """A writer's name in leases: the host, the process and a random part (two runtimes of one
    process are two owners)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How a runtime's journals write."""

    owner: str = field(default_factory=new_owner)
    ttl: float = 30.0
    """Seconds a lease lasts unless renewed; the heartbeat renews it every third of that. A run
    past that since its last claim or renewal was sent takes its lease for lost (`lease`)."""
    partial_every: float = 0.5
    snapshot_every: int = 200
    """Events appended since the newest snapshot past which a run's end saves another."""
    environment: str | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """How the heartbeat waits (tests inject a clock)."""
    clock: Callable[[], float] = time.monotonic
    """What a lease's deadline is read with (seconds; tests inject a clock)."""
    observers: tuple[Observer, ...] | None = None
    """What sees every event of the sessions' runs (None: the process's default as each session
    is made; a `Runtime` reads it as it is made)."""
    toolsets: Toolsets = field(default_factory=Toolsets)
    """The owner of the live toolsets the sessions' runs enter (the runtime's: exited as it
    closes)."""

    def of_sessions(self) -> dict[str, Any]:
        """What the runtime's sessions are made with, besides their key and journal."""
        return {
            "environment": self.environment,
            "observers": self.observers,
            "toolsets": self.toolsets,
        }

    @property
    def lease_seconds(self) -> float:
        override = os.environ.get(LEASE_ENV)
        return float(override) if override else self.ttl


@functools.cache
def crash_points_of_process() -> dict[str, int]:
    """The counts left before each crash point, one for all the process's journals."""
    return _crash_points(os.environ.get(CRASH_ENV, ""))


def _crash_points(spec: str) -> dict[str, int]:
    points = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, count = part.partition("#")
        points[kind] = int(count or 1)
    return points


def maybe_crash(points: dict[str, int], events: Sequence[ev.Event]) -> None:
    for event in events:
        crash_after(event.type, points)


def crash_after(kind: str, points: dict[str, int] | None = None) -> None:
    """A commit of `kind` (`pending:decided`: a decision, which the log commits itself) was
    made: a crash point of the process's (`CRASH_ENV`) kills it now when its count is up."""
    points = crash_points_of_process() if points is None else points
    if kind in points:
        points[kind] -= 1
        if points[kind] == 0:
            os._exit(86)


class Committing:
    """How a journal commits the events it buffered to its log, under its run's lease (the base
    of `journal.LogJournal`, which holds the fields named here)."""

    log: Store
    key: SessionKey
    lease: Lease | None
    stale: StaleWriter | None
    buffer: list[ev.Event]
    seqs: dict[int, int]
    held: list[ev.Event]
    """The events `seqs` names, kept alive while the run lasts: an event freed meanwhile (a
    `message:partial`, which no stream carries) would leave its id to a later event."""
    loaded_seq: int
    last_seq: int
    last_commit: float
    partial: list[str]
    streamed: int
    crash: dict[str, int]
    on_foreign: Callable[[list[StoredEvent]], None] | None
    encoded: dict[int, str]
    """The JSON of buffered events encoded as they came (`encode`), by their id."""
    _lock: asyncio.Lock

    def seq_of(self, event: ev.Event) -> int | None:
        return self.seqs.get(id(event))

    def _partial(self) -> ev.MessagePartial:
        """The reply's text streamed since its last `message:partial`."""
        text, offset = "".join(self.partial), self.streamed
        self.partial, self.streamed = [], offset + len(text)
        return ev.MessagePartial(text=text, offset=offset)

    def encode(self, event: ev.Event) -> None:
        """Encode a reply as it comes, before it is buffered. It is no commit point of its own:
        it is committed with the call's intent after it, or with the run's end (a crash between
        them loses it, and the model is asked again); but a reply the log cannot take (a lone
        surrogate) fails now, as its own commit did (`CommitFailed`, the events before it kept,
        made valid). The log stores the text as it is (`store.log.EncodedEvents`)."""
        try:
            self.encoded[id(event)] = dumps(event)
        except Exception as exc:
            events, self.buffer = [*self.buffer, event], []
            self._failed(events, exc, cancelled=False)

    def _failed(self, events: list[ev.Event], exc: Exception, *, cancelled: bool) -> None:
        """The log took none of `events` (a lone surrogate, a bug): they are kept, made valid,
        for the next commit, and the run is told."""
        self.buffer[:0] = map(valid_data, events)
        self.loaded_seq = -1  # the history in memory may not be the log's
        if cancelled:
            raise asyncio.CancelledError from exc
        kinds = ", ".join(dict.fromkeys(e.type for e in events))
        raise CommitFailed(valid(f"a commit of {kinds} failed: {describe(exc)}")) from exc

    async def _commit(self, extra: ev.Event | None = None) -> None:
        cancelled = False
        async with self._lock:
            events = self.buffer if extra is None else [*self.buffer, extra]
            if not events:
                return
            self.buffer = []
            if self.encoded:  # (taken whatever follows: none is left behind)
                encoded = self.encoded
                events = EncodedEvents(events, [encoded.pop(id(e), None) for e in events])
            if self.stale is not None:
                raise self.stale
            if self.lease is None:
                return  # the run ended: a late steering message is dropped with it
            # (a log's future as it is: done already when it committed on the spot; a coroutine
            # becomes a task, so a cancel cannot stop the commit halfway)
            append = asyncio.ensure_future(self.log.append(self.lease, events))
            while not append.done():
                try:
                    await asyncio.wait((append,))
                except asyncio.CancelledError:  # the run is cancelled (Ctrl-C) as the log
                    cancelled = True  # commits: the batch is accounted for, then it stops
            try:
                last = append.result()
            except StaleWriter as exc:
                self.stale = exc
                raise
            except StoreError:
                raise  # the store failed (full, locked, unreachable): the run stops with it
            except Exception as exc:  # the log took none of them (a lone surrogate, a bug)
                self._failed(events, exc, cancelled=cancelled)
            first = last - len(events) + 1
            if first > self.last_seq + 1 and self.on_foreign is not None:
                gap = first - 1 - self.last_seq
                self._foreign(await self.log.read(self.key, after=self.last_seq, limit=gap))
            self.seqs.update(zip(map(id, events), range(first, last + 1), strict=True))
            self.held += events
            if first == self.last_seq + 1 and self.loaded_seq == self.last_seq:
                self.loaded_seq = last  # nobody else wrote: the history in memory is the log's
            self.last_seq = last
            self.last_commit = time.monotonic()
        if self.crash:
            maybe_crash(self.crash, events)
        if cancelled:
            raise asyncio.CancelledError

    async def _flush(self) -> None:
        try:
            await self._commit()
        except (StoreError, CommitFailed) as exc:
            logger.warning("session %s: a steering message was not logged: %s", self.key.id, exc)

    def _foreign(self, stored: list[StoredEvent]) -> None:
        self.loaded_seq = -1  # the history in memory no longer matches the log
        self.seqs.update((id(item.event), item.seq) for item in stored)
        self.held += [item.event for item in stored]
        if self.on_foreign is not None:
            self.on_foreign(stored)
