"""The delivery worker: an asyncio task beside the server's runs that empties the outbox.

Each round (`tick`) it fans new notices out to every notifier (`Outbox.expand`: only when the
outbox changed, a cheap read otherwise), claims what is due, sends it — every claimed delivery
at once, each bounded by its webhook's timeout — and records each attempt. A failure that may
pass is tried again after `backoff` (exponential, with jitter: `base * 2**(n-1)`, capped, then
scaled by a random factor in [0.5, 1)), up to `max_attempts`; then it is `failed`. Nothing here
blocks a run: the runs only wrote their notice, in their own commit.

Several processes may run a worker on one database: a claim holds a delivery for `hold` seconds
(`[notify] hold`),
and a worker that dies holding it lets another one send it again (at-least-once; the delivery
id stays the same, so a receiver drops the duplicate). Once an hour it forgets deliveries done
with for longer than `[notify] keep`, and their notices. The clock, the random source and the
sleep are injected: the tests drive `tick` with a clock they move, and never sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as randoms
import time
from collections.abc import Awaitable, Callable, Sequence

from .. import redact
from ..errors import UnknownPending
from ..plugins import Notifier
from ..runtime.commits import new_owner
from ..runtime.reading import Reading
from ..store.outbox import AttemptOutcome, Delivery, outbox_of
from ..store.sql import iso
from .config import NotifySettings
from .links import Links
from .message import message, wanted
from .webhook import Sent

log = logging.getLogger("loopwright.notify")
PRUNE_EVERY = 3600.0
"""Seconds between two prunings of what is done with (`[notify] keep`)."""


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
    ) -> None:
        self.reading, self.outbox = reading, outbox_of(reading.log)
        self.notifiers = {n.name: n for n in notifiers}
        self.settings, self.links = settings, links
        self.clock, self.random, self.base, self.cap = clock, random, base, cap
        self.hold = settings.hold if hold is None else hold
        self.poll, self.owner = poll, new_owner()
        self._sleep = sleep
        self._seen: tuple[int, int] | None = None
        self._pruned = -PRUNE_EVERY
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- one round ---------------------------------------------------------------------------

    async def tick(self) -> int:
        """Fan out what is new, send what is due; returns how many attempts were made."""
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
            keep = max(self.settings.keep, self.settings.max_age)
            await self.outbox.prune(iso(now - keep))
            self._pruned = now
        due = await self.outbox.next_due(self.notifiers)
        if due is None or due > now:
            return 0
        claimed = await self.outbox.claim(self.notifiers, now, hold=self.hold, owner=self.owner)
        tried = await asyncio.gather(*(self._deliver(d) for d in claimed))
        return sum(tried)

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
            sent = await notifier.send(message(delivery, item, sent_at, self.links))
        except Exception as exc:  # a notifier's bug must not stop the others
            log.exception("notifier %s failed", notifier.name)
            sent = Sent(False, error=f"{type(exc).__name__}: {exc}", retry=True)
        await self.outbox.record(delivery, self._outcome(delivery, sent))
        return 1

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
                await self.tick()
                due = await self.outbox.next_due(self.notifiers)
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
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for notifier in self.notifiers.values():
            closing = getattr(notifier, "close", None)
            if closing is not None:
                await closing()
