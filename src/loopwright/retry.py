"""Retries of model requests: bounded by attempts, backoff (honouring `retry-after`) and a
per-request deadline (SPEC §3.8: each request runs under an `asyncio.timeout`, and a request
past it fails as retryable). Only the model request is sent again — tools never re-run — and
text an attempt had already streamed rides into the next one as a note, so nothing shown is
lost."""

from __future__ import annotations

import asyncio

from . import events as ev
from .agent import RetryPolicy
from .models import ModelFailure


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
    `asyncio.Timeout` a run, entered at its first request and rescheduled for each (a timer
    while a request runs, none between them), and exited as `async with` would exit it once it
    expires (a new one serves the requests after). `start()` before a request; after it,
    `done()` when it completed, else `stop()` with what it raised."""

    __slots__ = ("limit", "timeout")

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.timeout: asyncio.Timeout | None = None

    async def start(self) -> None:
        timeout = self.timeout
        if timeout is None:
            timeout = self.timeout = await asyncio.timeout(None).__aenter__()
        if self.limit is not None:
            timeout.reschedule(asyncio.get_running_loop().time() + self.limit)

    def done(self) -> bool:
        """The request ended: its timer is off. False when it expired meanwhile: `stop()` then
        exits it as `async with` would."""
        timeout = self.timeout
        assert timeout is not None
        if timeout.expired():
            return False
        timeout.reschedule(None)
        return True

    async def stop(self, exc: BaseException | None = None) -> bool:
        """The request ended, raising `exc` (None: it completed): True when that is its
        deadline's cancellation (a retryable failure), False when `exc` goes on (if any)."""
        if self.done():
            return False
        timeout, self.timeout = self.timeout, None
        assert timeout is not None
        kind = type(exc) if exc is not None else None
        try:
            await timeout.__aexit__(kind, exc, exc.__traceback__ if exc is not None else None)
        except TimeoutError:
            return True
        return isinstance(exc, TimeoutError)  # (as `except TimeoutError` around it would take)
