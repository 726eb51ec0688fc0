"""Retries of model requests: bounded by attempts, backoff (honouring `retry-after`) and a
per-request deadline (SPEC §3.8). Only the model request is sent again — tools never re-run —
and text an attempt had already streamed rides into the next one as a note, so nothing shown
is lost."""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

from . import events as ev
from .agent import RetryPolicy
from .models import ModelFailure

if TYPE_CHECKING:
    from .loop import Control


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
    """The model request's deadline (`RetryPolicy.deadline`): `with deadline:` around a request.

    A request costs a clock read: one watchdog timer per event loop serves every request in it.
    At the deadline the driver's `on_deadline` lands a cancellation where the loop waits, and
    `Steps.expired` turns it into a retryable failure."""

    __slots__ = ("at", "control", "limit", "watchdog")

    def __init__(self, limit: float | None, control: Control) -> None:
        self.limit, self.control = limit, control
        self.at: float | None = None
        self.watchdog: _Watchdog | None = None

    def __enter__(self) -> None:
        if self.limit is None or self.control.on_deadline is None:
            return
        loop = asyncio.get_running_loop()
        self.at = loop.time() + self.limit
        if self.watchdog is None:
            self.watchdog = _WATCHDOGS.get(loop) or _WATCHDOGS.setdefault(loop, _Watchdog())
        self.watchdog.watch(self, loop)

    def __exit__(self, kind: object, *_: object) -> None:
        self.at = None
        if self.watchdog is not None:
            self.watchdog.active.discard(self)
        if kind is None:
            self.control.expired = False  # done in time (a deadline that came too late is void)

    def fire(self) -> None:
        self.at = None
        if self.control.on_deadline is not None:
            self.control.on_deadline()


class _Watchdog:
    """The requests in flight on one event loop, and the one timer that checks their deadlines
    (re-armed for the earliest; it holds no reference to the loop)."""

    __slots__ = ("__weakref__", "active", "armed_at")

    def __init__(self) -> None:
        self.active: set[Deadline] = set()
        self.armed_at: float | None = None

    def watch(self, deadline: Deadline, loop: asyncio.AbstractEventLoop) -> None:
        self.active.add(deadline)
        assert deadline.at is not None
        if self.armed_at is None or deadline.at < self.armed_at:
            self.armed_at = deadline.at
            loop.call_at(deadline.at, self.check)

    def check(self) -> None:
        loop = asyncio.get_running_loop()
        now, self.armed_at = loop.time(), None
        for deadline in [d for d in self.active if d.at is not None and d.at <= now]:
            self.active.discard(deadline)
            deadline.fire()
        pending = [d.at for d in self.active if d.at is not None]
        if pending:
            self.armed_at = min(pending)
            loop.call_at(self.armed_at, self.check)


_WATCHDOGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = (
    weakref.WeakKeyDictionary()
)
