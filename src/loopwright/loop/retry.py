"""Retries of model requests: bounded by attempts, backoff (honouring `retry-after`) and a
per-request deadline (SPEC §3.8: each request runs under an `asyncio.timeout`, and a request
past it fails as retryable). Only the model request is sent again — tools never re-run — and
text an attempt had already streamed rides into the next one as a note, so nothing shown is
lost."""

from __future__ import annotations

import asyncio

from .. import events as ev
from ..agent import RetryPolicy
from ..models import ModelFailure


def next_retry(
    policy: RetryPolicy, failure: ModelFailure, failures: int, spent: int = 0
) -> ev.ModelRetry | None:
    """The retry to make after `failures` earlier failures of this request (and `spent`
    retries of the run), or None when the failure is not retryable or a bound is reached."""
    if not failure.retryable or failures >= policy.attempts or spent >= policy.budget:
        return None
    delay = min(policy.max_delay, failure.retry_after or policy.backoff * (failures + 1))
    return ev.ModelRetry(attempt=failures + 1, error=failure.error, delay=delay)


def partial_note(partial: list[str]) -> str:
    return f"[Your previous attempt was cut off after: {''.join(partial)}]"


class ModelFailed(Exception):
    """Raised inside the loop when a reply failed past the retry bound."""

    def __str__(self) -> str:
        return f"model request failed: {self.args[0]}"


class Deadline:
    """The model request's deadline (`RetryPolicy.deadline`), first byte to last: one
    `asyncio.Timeout` a run, entered at its first request, that expires when a request runs past
    its due (and is exited as `async with` would exit it; a new one serves the requests after).
    The dues are watched by one timer of the event loop for all its runs (`_Watch`: no timer is
    made per run or per request; none is left once no run watches), and `close()` stops the
    watch as the run ends. `start()` before a request (`enter()` first when `timeout` is None);
    after it, `done()` when it completed, else `stop()` with what it raised (True: `lapsed`, its
    expiry, a retryable failure). (Not `async with`: it costs more a request.)"""

    __slots__ = ("due", "lapsed", "limit", "timeout", "watch")

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.timeout: asyncio.Timeout | None = None
        self.due: float | None = None
        """When the request in flight is due (None between requests)."""
        self.watch: _Watch | None = None
        self.lapsed = False
        """The last request ran past its due (and what it raised for it was taken)."""

    async def enter(self) -> None:
        """Enter the run's timeout (at its first request, and after one that expired)."""
        self.timeout = await asyncio.timeout(None).__aenter__()

    def start(self) -> None:
        """A request starts (the timeout entered: `enter`)."""
        self.lapsed = False
        if self.limit is not None:
            watch = self.watch or _watch()
            self.due = watch.loop.time() + self.limit
            watch.add(self)
            self.watch = watch

    def done(self) -> bool:
        """The request ended: it is no longer due. False when it expired meanwhile: `stop()`
        then exits the timeout as `async with` would. (True after `stop()`: nothing is due.)"""
        timeout = self.timeout
        if timeout is None:
            return True
        if timeout.expired():
            return False
        if timeout.when() is not None:  # due, and its expiry not yet run: it will not
            timeout.reschedule(None)
        self.due = None
        if (watch := self.watch) is not None:  # (watched only while due: nothing holds a run
            watch.deadlines.discard(self)  # that was dropped between requests)
        return True

    async def stop(self, exc: BaseException | None = None) -> bool:
        """The request ended, raising `exc` (None: it completed): True when that is its
        deadline's cancellation (a retryable failure), False when `exc` goes on (if any)."""
        if self.done():
            return False
        timeout, self.timeout, self.due = self.timeout, None, None
        assert timeout is not None
        if (watch := self.watch) is not None:
            watch.deadlines.discard(self)
        kind = type(exc) if exc is not None else None
        try:
            await timeout.__aexit__(kind, exc, exc.__traceback__ if exc is not None else None)
        except TimeoutError:
            self.lapsed = True
        else:  # (as `except TimeoutError` around it would take)
            self.lapsed = isinstance(exc, TimeoutError)
        return self.lapsed

    def close(self) -> None:
        """The run is over: its dues are no longer watched (the last run's turns the timer off)."""
        watch, self.watch = self.watch, None
        if watch is not None:
            watch.deadlines.discard(self)
            if not watch.deadlines and watch.timer is not None:
                watch.timer.cancel()
                watch.timer = None


class _Watch:
    """The deadlines of one event loop's runs, watched by one timer: armed for the earliest due
    it was told of, it is moved only when it fires (a request that ends leaves it armed and the
    next sets its own due), and then expires what is past due and waits for the earliest due
    left."""

    __slots__ = ("deadlines", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.deadlines: set[Deadline] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, deadline: Deadline) -> None:
        self.deadlines.add(deadline)
        due, timer = deadline.due, self.timer
        assert due is not None
        if timer is None or due < timer.when():  # (a shorter limit than the runs' before)
            if timer is not None:
                timer.cancel()
            self.timer = self.loop.call_at(due, self.fire)

    def fire(self) -> None:
        self.timer, now, earliest = None, self.loop.time(), None
        for deadline in list(self.deadlines):
            due, timeout = deadline.due, deadline.timeout
            if due is None or timeout is None:
                continue  # no request in flight: the next one tells its due
            if due <= now:  # past it: the timeout expires (its task is cancelled where it waits)
                timeout.reschedule(due)
            elif earliest is None or due < earliest:
                earliest = due
        if earliest is not None:
            self.timer = self.loop.call_at(earliest, self.fire)


_last: _Watch | None = None


def _watch() -> _Watch:
    """The running loop's watch (one loop runs at a time in most processes: kept at hand)."""
    global _last
    loop = asyncio.get_running_loop()
    watch = _last
    if watch is None or watch.loop is not loop:
        watch = _last = _Watch(loop)
    return watch
