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
    One timer a run watches the dues: armed at the first request, it is moved only when it fires
    (a request that ends leaves it armed and the next sets its own due: no timer is made and
    cancelled per request), and `close()` turns it off as the run ends. `start()` before a
    request (`enter()` first when `timeout` is None); after it, `done()` when it completed, else
    `stop()` with what it raised (True: `lapsed`, its expiry, a retryable failure). (Not
    `async with`: it costs more a request.)"""

    __slots__ = ("due", "given", "lapsed", "limit", "timeout", "timer")

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.timeout: asyncio.Timeout | None = None
        self.due: float | None = None
        """When the request in flight is due (None between requests)."""
        self.timer: asyncio.TimerHandle | None = None
        self.lapsed = False
        """The last request ran past its due (and what it raised for it was taken)."""
        self.given = False
        """The timeout was given a due (`_fired`): only then may it expire (it is ours alone)."""

    async def enter(self) -> None:
        """Enter the run's timeout (at its first request, and after one that expired)."""
        self.timeout, self.given = await asyncio.timeout(None).__aenter__(), False

    def start(self) -> None:
        """A request starts (the timeout entered: `enter`)."""
        self.lapsed = False
        if self.limit is not None:
            loop = asyncio.get_running_loop()
            due = self.due = loop.time() + self.limit
            if self.timer is None:
                self.timer = loop.call_at(due, self._fired)

    def _fired(self) -> None:
        self.timer, due, timeout = None, self.due, self.timeout
        if due is None or timeout is None:
            return  # no request in flight: the next one arms it again
        loop = asyncio.get_running_loop()
        if due > loop.time():  # a later request's due
            self.timer = loop.call_at(due, self._fired)
        else:  # past it: the timeout expires (its task is cancelled where it waits)
            timeout.reschedule(due)
            self.given = True

    def done(self) -> bool:
        """The request ended: it is no longer due. False when it expired meanwhile: `stop()`
        then exits the timeout as `async with` would. (True after `stop()`: nothing is due.)"""
        timeout = self.timeout
        if timeout is None:
            return True
        if self.given:  # (most requests: never given a due, nothing to ask it)
            if timeout.expired():
                return False
            if timeout.when() is not None:  # due, and its expiry not yet run: it will not
                timeout.reschedule(None)
            self.given = False
        self.due = None
        return True

    async def stop(self, exc: BaseException | None = None) -> bool:
        """The request ended, raising `exc` (None: it completed): True when that is its
        deadline's cancellation (a retryable failure), False when `exc` goes on (if any)."""
        if self.done():
            return False
        timeout, self.timeout, self.due = self.timeout, None, None
        assert timeout is not None
        kind = type(exc) if exc is not None else None
        try:
            await timeout.__aexit__(kind, exc, exc.__traceback__ if exc is not None else None)
        except TimeoutError:
            self.lapsed = True
        else:  # (as `except TimeoutError` around it would take)
            self.lapsed = isinstance(exc, TimeoutError)
        return self.lapsed

    def close(self) -> None:
        """The run is over: its timer is turned off."""
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
