"""The delivery worker: an asyncio task beside the server's runs that empties the outbox.

Each round it fans new notices out to every notifier (`Outbox.expand`: only when the outbox
changed, a cheap read otherwise), claims what is due and starts sending it, and each attempt
records itself when it ends. Deliveries are independent: a round never waits for an attempt, so
a slow or dead receiver delays no other; each target has at most `in_flight` attempts going at
once (one while it keeps failing), and every attempt ends by `hold` at the latest (a webhook's
by its own `timeout`, its whole answer included). A failure that may pass is tried again after
`backoff` (exponential, with jitter: `base * 2**(n-1)`, capped, then scaled by a random factor
in [0.5, 1)), up to `max_attempts`; then it is `failed`. A target that keeps failing backs off
as a whole, by the same rule over its consecutive failures: nothing is posted to it before
that, whatever else is due for it. Nothing here blocks a run: the runs only wrote their notice,
in their own commit.

Several processes may run a worker on one database: a claim holds a delivery for `hold` seconds
(`[notify] hold`), and a worker that dies holding it lets another one send it again
(at-least-once; the delivery id stays the same, so a receiver drops the duplicate). Once an
hour it gives up deliveries still not delivered `[notify] max_age` after they were made (the
outbox does not grow while a receiver is down) and forgets deliveries done with for longer than
`[notify] keep`, and their notices. The clock, the random source and the sleep are injected:
the tests drive `tick` (one whole round) with a clock they move, and never sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as randoms
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from .. import redact
from ..errors import UnknownPending
from ..plugins import Notifier
from ..runtime.commits import new_owner
from ..runtime.reading import Reading
from ..store.outbox import AttemptOutcome, Delivery
from ..store.sql import iso
from .config import NotifySettings, public_name
from .links import Links
from .message import message, wanted
from .webhook import Sent

log = logging.getLogger("loopwright.notify")
PRUNE_EVERY = 3600.0
"""Seconds between two prunings of what is done with (`[notify] keep`)."""
IN_FLIGHT = 4
"""Attempts going at once to one target at most (one while it keeps failing)."""


@dataclass(slots=True)
class _Target:
    """One target's attempts in flight in this worker, and its backoff as a whole."""

    flying: set[asyncio.Task[int]] = field(default_factory=set)
    failures: int = 0
    """Its consecutive failed attempts (none: it answers)."""
    until: float = 0.0
    """Nothing is posted to it before (it keeps failing)."""

    def free(self, in_flight: int, now: float) -> int:
        if self.until > now:
            return 0
        return (1 if self.failures else in_flight) - len(self.flying)


class Deliverer:
    """Delivers the outbox of the runtime's log to `notifiers` (see the module docstring); the
    items its notices name are read through the runtime (`reading`: a `Runtime`)."""

    def __init__(
        self,
        reading: Reading,
        notifiers: Sequence[Notifier],
        settings: NotifySettings,
        links: Links | None = None,
        *,
        clock: Callable[[], float] = time.time,
        random: Callable[[], float] = randoms.random,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        base: float = 2.0,
        cap: float = 600.0,
        hold: float | None = None,
        poll: float = 0.5,
        in_flight: int = IN_FLIGHT,
    ) -> None:
        self.reading, self.outbox = reading, reading.outbox
        self.notifiers = {n.name: n for n in notifiers}
        self.settings, self.links = settings, links
        self.clock, self.random, self.base, self.cap = clock, random, base, cap
        self.hold = settings.hold if hold is None else hold
        self.poll, self.owner, self.in_flight = poll, new_owner(), in_flight
        self._targets = {name: _Target() for name in self.notifiers}
        self._sleep = sleep
        self._seen: tuple[int, int] | None = None
        self._pruned = -PRUNE_EVERY
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- one round ---------------------------------------------------------------------------

    async def tick(self) -> int:
        """One whole round: fan out what is new, start what is due, and wait for the attempts
        it started (the running task never waits: `_run`); returns how many were made."""
        return sum(await asyncio.gather(*await self._round()))

    async def _round(self) -> list[asyncio.Task[int]]:
        """Fan out what is new and start sending what is due; returns the attempts started."""
        seen = await self.outbox.notices()
        if seen != self._seen:
            for notifier in self.notifiers.values():
                events = ["pending"] if notifier.events - {"resolved"} else []
                events += ["resolved"] if "resolved" in notifier.events else []
                await self.outbox.expand(
                    notifier.name, events, self.clock(), max_age=self.settings.max_age
                )
            self._seen = seen
        now = self.clock()
        if now - self._pruned >= PRUNE_EVERY:
            max_age, keep = self.settings.max_age, max(self.settings.keep, self.settings.max_age)
            expired = f"expired: not delivered within max_age ({max_age:g} s)"
            await self.outbox.expire(iso(now - max_age), expired, now)
            await self.outbox.prune(iso(now - keep))
            self._pruned = now
        ready = self._ready(now)
        due = await self.outbox.next_due(ready) if ready else None
        if due is None or due > now:
            return []
        started = []
        for name in ready:  # (a claim each: no target takes another's slots)
            target = self._targets[name]
            free = target.free(self.in_flight, now)
            for d in await self.outbox.claim(
                [name], now, hold=self.hold, owner=self.owner, limit=free
            ):
                started.append(self._start(target, d))
        return started

    def _ready(self, now: float) -> list[str]:
        """The targets that may be sent more now."""
        return [n for n, t in self._targets.items() if t.free(self.in_flight, now) > 0]

    def _start(self, target: _Target, delivery: Delivery) -> asyncio.Task[int]:
        task = asyncio.create_task(self._deliver(delivery), name="loopwright-notify-attempt")
        target.flying.add(task)

        def ended(task: asyncio.Task[int]) -> None:
            target.flying.discard(task)
            self._wake.set()  # (a slot is free)
            if not task.cancelled() and task.exception() is not None:  # (held: tried later)
                log.error("recording a delivery failed", exc_info=task.exception())

        task.add_done_callback(ended)
        return task

    async def _deliver(self, delivery: Delivery) -> int:
        notifier = self.notifiers[delivery.target]
        notice = delivery.notice
        try:
            item = await self.reading.item(notice.tenant, notice.item)
        except UnknownPending:  # (not on this log: nothing to say)
            await self.outbox.record(delivery, AttemptOutcome("skipped", iso(self.clock())))
            return 0
        if not wanted(notice.event, item.kind, notifier.events):
            await self.outbox.record(delivery, AttemptOutcome("skipped", iso(self.clock())))
            return 0
        sent_at = iso(self.clock())
        try:
            async with asyncio.timeout(self.hold):  # (no attempt outlives its claim)
                sent = await notifier.send(message(delivery, item, sent_at, self.links))
        except TimeoutError:
            sent = Sent(False, error=f"no answer within the hold ({self.hold:g} s)", retry=True)
        except Exception as exc:  # a notifier's bug must not stop the others
            log.exception("notifier %s failed", public_name(notifier.name))
            sent = Sent(False, error=f"{type(exc).__name__}: {exc}", retry=True)
        self._answered(self._targets[delivery.target], sent)
        await self.outbox.record(delivery, self._outcome(delivery, sent))
        return 1

    def _answered(self, target: _Target, sent: Sent) -> None:
        """A target that keeps failing backs off as a whole; one that answers is itself again."""
        if not sent.retry:  # (delivered, or refused: it answers)
            target.failures, target.until = 0, 0.0
            return
        target.failures += 1
        target.until = self.clock() + self.backoff(target.failures)

    def _outcome(self, delivery: Delivery, sent: Sent) -> AttemptOutcome:
        now, attempt = self.clock(), delivery.attempts + 1
        at = iso(now)
        if sent.ok:
            return AttemptOutcome("delivered", at, sent.status)
        error = redact.text(sent.error)[:500] if sent.error else sent.error  # (stored, served)
        if not sent.retry or attempt >= self.settings.max_attempts:
            return AttemptOutcome("failed", at, sent.status, error)
        return AttemptOutcome("due", at, sent.status, error, due=now + self.backoff(attempt))

    def backoff(self, attempt: int) -> float:
        """Seconds before the attempt after `attempt` (1 = the first one failed)."""
        delay = min(self.cap, self.base * 2.0 ** (attempt - 1))
        return delay * (0.5 + self.random() / 2)

    async def settled(self, target: str) -> None:
        """Once the attempts to `target` in flight now have ended (and recorded themselves)."""
        await asyncio.gather(*self._targets[target].flying, return_exceptions=True)

    # ---- the task ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None and self.notifiers:
            self._task = asyncio.create_task(self._run(), name="loopwright-notify")

    def wake(self) -> None:
        """Look now (something was committed here)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                await self._round()
                ready = self._ready(self.clock())
                due = await self.outbox.next_due(ready) if ready else None
            except asyncio.CancelledError:
                raise
            except Exception:  # the database may be back on the next round
                log.exception("delivering notifications failed")
                due = None
            wait = self.poll if due is None else min(self.poll, max(0.0, due - self.clock()))
            await self._pause(wait)

    async def _pause(self, seconds: float) -> None:
        if self._sleep is not None:
            await self._sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):  # (not `wait_for`: on 3.11 it may swallow the
            async with asyncio.timeout(seconds):  # cancel of `close` when woken at that moment)
                await self._wake.wait()
        self._wake.clear()

    async def close(self) -> None:
        running, self._task = self._task, None
        if running is not None:  # (gather: a cancel of the caller's own is not swallowed)
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        flying = [task for target in self._targets.values() for task in target.flying]
        for task in flying:  # (their deliveries stay held: tried again once the hold ends)
            task.cancel()
        await asyncio.gather(*flying, return_exceptions=True)
        for notifier in self.notifiers.values():
            closing = getattr(notifier, "close", None)
            if closing is not None:
                await closing()
