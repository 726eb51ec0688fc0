"""Publishing a runtime's lifecycle notifications (`state.lifecycle`) to its subscribers.

`Lifecycle` keeps the status of each session this process holds in memory, and publishes
`session:created`, `session:status` and `session:disposed` to every subscription that matches
(a tenant, optionally one session). A subscriber has a bounded queue: one that falls behind
loses notifications (logged, counted in `dropped`), never slows a run. The runtime's close
disposes of every session still held and ends every subscription.

    async for event in runtime.lifecycle("acme"):
        print(event.session_id, event.type)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from ..errors import SessionBusy
from ..events import Done
from ..state.lifecycle import (
    DisposedReason,
    ForkSource,
    LifecycleEvent,
    SessionCreated,
    SessionDisposed,
    SessionStatusChanged,
    SessionStatusName,
)
from ..store import StaleWriter
from ..store.log import SessionKey

logger = logging.getLogger("loopwright.runtime")

QUEUE_SIZE = 1024
"""Notifications a subscriber may fall behind by before it loses the next ones."""


class Subscription:
    """One subscriber's notifications, in order, until it closes or the runtime does."""

    def __init__(self, hub: Lifecycle, tenant: str | None, key: SessionKey | None) -> None:
        self.tenant = tenant
        self.key = key
        self.dropped = 0
        """Notifications lost because this subscriber fell `QUEUE_SIZE` behind."""
        self._queue: asyncio.Queue[LifecycleEvent | None] = asyncio.Queue(QUEUE_SIZE)
        self._hub: Lifecycle | None = hub
        self._ended = False

    def matches(self, key: SessionKey) -> bool:
        if self.key is not None:
            return key == self.key
        return self.tenant is None or key.tenant == self.tenant

    def put(self, event: LifecycleEvent) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            logger.warning(
                "lifecycle subscriber fell behind: dropped %s of session %s (%d dropped)",
                event.type,
                event.session_id,
                self.dropped,
            )

    def end(self) -> None:
        """No more notifications: the iteration ends once it has taken those queued."""
        self._ended = True
        hub, self._hub = self._hub, None
        if hub is not None:
            hub.subscriptions.discard(self)
        if self._queue.empty():
            self._queue.put_nowait(None)

    close = end

    def __aiter__(self) -> AsyncIterator[LifecycleEvent]:
        return self

    async def __anext__(self) -> LifecycleEvent:
        if self._ended and self._queue.empty():
            raise StopAsyncIteration
        event = await self._queue.get()
        if event is None:
            raise StopAsyncIteration
        return event


class Lifecycle:
    """The statuses of the sessions a runtime holds, and the subscriptions to their changes."""

    def __init__(self) -> None:
        self.statuses: dict[SessionKey, SessionStatusName] = {}
        """Sessions this process holds in memory, by their last status."""
        self.subscriptions: set[Subscription] = set()
        self.closed = False

    def subscribe(self, tenant: str | None = None, key: SessionKey | None = None) -> Subscription:
        """Notifications from now on: of `tenant`'s sessions (every tenant's when None), or of
        the session `key` only. Ends at once when the runtime has closed."""
        subscription = Subscription(self, tenant, key)
        if self.closed:
            subscription.end()
        else:
            self.subscriptions.add(subscription)
        return subscription

    def created(self, key: SessionKey, forked_from: ForkSource | None = None) -> None:
        if self.subscriptions:  # (nobody listens: nothing to make)
            self._publish(
                key,
                SessionCreated(
                    tenant=key.tenant, agent=key.agent, session_id=key.id, forked_from=forked_from
                ),
            )

    def status(self, key: SessionKey, status: SessionStatusName) -> None:
        """The session's status is now `status` (published when it changed)."""
        previous = self.statuses.get(key)
        if previous == status:
            return
        self.statuses[key] = status
        if not self.subscriptions:
            return
        self._publish(
            key,
            SessionStatusChanged(
                tenant=key.tenant,
                agent=key.agent,
                session_id=key.id,
                status=status,
                previous=previous,
            ),
        )

    def disposed(self, key: SessionKey, reason: DisposedReason) -> None:
        """The runtime let go of the session (published once for what it held)."""
        if self.statuses.pop(key, None) is not None and self.subscriptions:
            self._publish(
                key,
                SessionDisposed(
                    tenant=key.tenant, agent=key.agent, session_id=key.id, reason=reason
                ),
            )

    def ran(self, key: SessionKey, start_seq: int) -> None:
        """A run of the session has its input in the log: a new session's first (its log was
        empty before it) creates it."""
        if start_seq == 0:
            self.created(key)
        self.status(key, "running")

    def ended(self, key: SessionKey, done: Done | None, failure: BaseException | None) -> None:
        """A run of the session ended: `paused` on open items, `idle` otherwise; without its
        `done` (taken over by another process, or failed) the runtime lets go of it."""
        if done is not None:
            self.status(key, "paused" if done.stop_reason == "paused" else "idle")
        else:
            taken = isinstance(failure, (StaleWriter, SessionBusy))
            self.disposed(key, "handed_over" if taken else "failed")

    def close(self) -> None:
        """The runtime closed: every session it held is disposed, every subscription ends."""
        for key in list(self.statuses):
            self.disposed(key, "closed")
        self.closed = True
        for subscription in list(self.subscriptions):
            subscription.end()

    def _publish(self, key: SessionKey, event: LifecycleEvent) -> None:
        for subscription in list(self.subscriptions):
            if subscription.matches(key):
                subscription.put(event)
