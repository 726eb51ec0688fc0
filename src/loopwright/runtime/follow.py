"""A session's events for a follower: the log after a seq, then — when following — the events
of its runs as they come, across pauses, up to a `done` that is not a pause.

A run of this process is followed live (token deltas included, uncommitted events without a
seq); a run elsewhere through the log (`EventLog.follow`: committed events only). The follower
switches to a run of this process as soon as one starts (even one that ended before the
follower came to it: its events are still at hand), and back to the log when it ends paused or
stops without its `done` (taken over elsewhere). Nothing the log holds is skipped: a
seq is only ever that of a committed event, and an event may at worst come twice (once live
without a seq, once from the log) when a follower switches right as it is committed.

It sees this process's runs through `Running`, `Followed` and `Counted`, what it reads of them
(the runtime's `live.Live`, `live.LiveRun` and `live.Follower` are these): a run in progress is
followed (`LiveRun.stream`) by what does not know it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Protocol, TypeVar

from .. import events as ev
from ..store import StoredEvent
from ..store.log import EventLog, SessionKey, Store

Item = tuple[int | None, ev.Event]
T = TypeVar("T")


class Followed(Protocol):
    """What a follower reads of a run of this process (a `live.LiveRun`)."""

    @property
    def failure(self) -> BaseException | None: ...

    @property
    def done(self) -> ev.Done | None: ...

    @property
    def start_seq(self) -> int: ...

    async def settled(self) -> None: ...

    def subscribe(self, after: int) -> AsyncIterator[Item]: ...


class Counted(Protocol):
    """A follower of a session, counted until `close()` (a `live.Follower`)."""

    def close(self) -> None: ...


class Running(Protocol):
    """What a follower asks of the registry of this process's runs (a `live.Live`)."""

    def get(self, key: SessionKey) -> Followed | None: ...

    def started(self, key: SessionKey) -> asyncio.Future[Followed]: ...

    def attach(self, key: SessionKey) -> Counted: ...


def final(event: ev.Event | None) -> bool:
    """A `done` that ends a held stream: the run stopped for good (not paused)."""
    return type(event) is ev.Done and event.stop_reason != "paused"


async def follow(
    log: Store,
    registry: Running,
    key: SessionKey,
    *,
    after: int,
    follower: Counted | None = None,
    first: Followed | None = None,
) -> AsyncIterator[Item]:
    """See the module docstring; `follower` is counted until the caller stops (one is made
    when none is given). `first`: a run of this process followed first, even if it has ended
    by now (all its events, token deltas too, are still at hand)."""
    follower = follower or registry.attach(key)
    position = after
    try:
        while True:
            started = registry.started(key)  # a run that starts here from now on comes next,
            live, first = first or registry.get(key), None  # even if it ended by then
            if live is not None:
                await live.settled()
                if live.failure is None:
                    if position < live.start_seq:
                        for stored in await log.read(
                            key, after=position, limit=live.start_seq - position
                        ):
                            position = stored.seq
                            yield stored.seq, stored.event
                    async for seq, event in live.subscribe(position):
                        position = seq if seq is not None else position
                        yield seq, event
                    if final(live.done):
                        return
                    first = _started(started)
                    continue
            if await _over(log, key, position) and not started.done():
                return  # its latest run ended for good, and nothing of a run came after `after`
            ended = False
            async for seq, event in _from_log(log, key, position, started):
                position = seq
                yield seq, event
                if final(event) and await _over(log, key, seq, done=True):
                    ended = True  # the session's latest run ended for good
                    break
            if ended:
                return
            first = _started(started)
    finally:
        follower.close()


AFTER_DONE = 16
"""How many events after a run's `done` are read at a time to tell whether a run came after
it: decisions and steering for a next run come there, a handful as a rule."""


async def _over(log: Store, key: SessionKey, seq: int, *, done: bool = False) -> bool:
    """The session's latest run ended for good at or before `seq`: all that came after `seq`
    is decisions and steering for a next run (not a run's events), and either the event at
    `seq` is that run's final `done`, or the session is idle (its run may hold its lease a
    moment after its `done`)."""
    record = await log.session(key)
    if not (done or record.status == "idle"):
        return False
    while seq < record.last_seq:
        after = await log.read(key, after=seq, limit=AFTER_DONE)
        if not after:
            break
        if any(type(stored.event) not in _BETWEEN_RUNS for stored in after):
            return False
        seq = after[-1].seq
    return True


_BETWEEN_RUNS = (ev.PendingDecided, ev.SteeringQueued, ev.SteeringCleared, ev.MessageCustom)


def _started(started: asyncio.Future[Followed]) -> Followed | None:
    return started.result() if started.done() else None


async def _from_log(
    log: EventLog, key: SessionKey, after: int, started: asyncio.Future[Followed]
) -> AsyncIterator[tuple[int, ev.Event]]:
    """The log's events after `after` as they are committed, until a run of the session starts
    in this process (`started`: the caller then follows it live)."""
    if started.done():
        return
    events = aiter(log.follow(key, after=after))
    step: asyncio.Future[StoredEvent] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(events))
            await asyncio.wait((step, started), return_when=asyncio.FIRST_COMPLETED)
            if not step.done():  # a run started here: the caller follows it live
                step.cancel()
                await asyncio.gather(step, return_exceptions=True)
                return
            stored = step.result()
            yield stored.seq, stored.event
    finally:
        if step is not None and not step.done():  # the caller left: the read stops first
            step.cancel()  # (closing the reader while it reads raises RuntimeError)
            await asyncio.wait((step,))
            _retrieved(step)
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def _retrieved(step: asyncio.Future[StoredEvent]) -> None:
    """Take a stopped read's outcome, so that its failure (the log closed under it) is not
    reported as never retrieved."""
    if not step.cancelled():
        step.exception()


async def batches(items: AsyncIterator[T], every: float) -> AsyncGenerator[list[T] | None, None]:
    """`items` in batches — each what was queued when the reader came back, in order, so a
    reader slower than the run sends it on in one go — with a None after each `every` seconds
    of silence: a held stream stays open through a long pause (an SSE comment line per None).
    A task of its own reads `items`, so a silence never interrupts it mid-step; closing this
    iterator closes `items`. One timer a stream, moved on lazily: it fires at most once per
    `every` seconds, not armed and cancelled per item (with a thousand streams, a timer per
    item was a heap push and a cancelled entry per delta)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[T] | BaseException | _Silence | None] = asyncio.Queue()
    heard = loop.time()  # when something last came (an item, or a keep-alive)

    async def pump() -> None:
        nonlocal heard
        try:
            async for item in items:
                queue.put_nowait((item,))
                heard = loop.time()
            queue.put_nowait(None)
        except Exception as exc:
            queue.put_nowait(exc)

    timer: asyncio.TimerHandle | None = None

    def tick() -> None:
        nonlocal heard, timer
        now = loop.time()
        if now < heard + every:  # something came meanwhile: wait out the rest of `every`
            timer = loop.call_at(heard + every, tick)
            return
        queue.put_nowait(SILENCE)
        heard = now
        timer = loop.call_at(now + every, tick)

    task = loop.create_task(pump())
    timer = loop.call_at(heard + every, tick)
    try:
        while True:
            got = await queue.get()
            if got is SILENCE:
                yield None
                continue
            batch: list[T] = []
            while isinstance(got, tuple):
                batch.append(got[0])
                if queue.empty():
                    break
                got = queue.get_nowait()
            if batch:
                yield batch
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got
    finally:
        if timer is not None:
            timer.cancel()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        close = getattr(items, "aclose", None)
        if close is not None:
            with contextlib.suppress(RuntimeError):  # closed already by its own end
                await close()


class _Silence:
    """The keep-alive mark `batches`' timer queues (a silence of `every` seconds)."""


SILENCE = _Silence()
