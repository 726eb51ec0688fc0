"""A run's lease on its session, kept by a heartbeat, and known lost as soon as it is.

The heartbeat renews the lease every third of its length. The lease is lost when a renewal is
refused (`StaleWriter`: another process took the session over) or did not happen in time: the
heartbeat wakes past the lease's deadline (its process was paused, or its event loop blocked),
and another process may take the session over at any moment, if it has not already. Either
way the holder is told at once (`Holder.lose`), with no store round trip for the second: its
calls in flight are told to stop (`ToolContext.cancelled`) and the run ends fenced.

The deadline is this process's own: `Settings.clock` read before the claim or renewal was sent,
plus `Settings.ttl` — never later than the expiry the store recorded, whatever the store's
clock says."""

from __future__ import annotations

import logging
from typing import Protocol

from ..store import StaleWriter, StoreError
from ..store.log import EventLog, Lease, SessionKey
from .commits import Settings

logger = logging.getLogger("loopwright.runtime")


class Holder(Protocol):
    """What holds a lease: a journal, while a run of its session goes on."""

    @property
    def log(self) -> EventLog: ...

    settings: Settings
    key: SessionKey
    lease: Lease | None
    """None once the run let its session go (the heartbeat stops)."""
    deadline: float
    """When the lease may have expired, by `Settings.clock`."""

    def lose(self, why: StaleWriter) -> None:
        """The lease is lost: the run stops, its calls in flight told at once."""


def deadline(settings: Settings, asked: float) -> float:
    """The deadline of a lease claimed or renewed by a request sent at `asked`."""
    return asked + settings.ttl


async def keep(holder: Holder) -> None:
    """Renew `holder`'s lease every third of its length until it is let go or lost."""
    log, settings, name = holder.log, holder.settings, holder.key.id
    ttl = settings.lease_seconds
    while True:
        await settings.sleep(ttl / 3)
        lease = holder.lease
        if lease is None:
            return
        asked = settings.clock()
        if asked >= holder.deadline:  # woken too late: another may hold the session already
            why = f"session {name}: its lease's deadline passed before the heartbeat woke"
            holder.lose(StaleWriter(why + " (its process was paused or its loop blocked)"))
            return
        try:
            holder.lease = await log.renew(lease, ttl=ttl)
        except StaleWriter as exc:
            holder.lose(exc)
            return
        except StoreError as exc:  # a busy database: the next beat tries again, in time
            logger.warning("session %s: lease not renewed: %s", name, exc)
        else:
            holder.deadline = deadline(settings, asked)
