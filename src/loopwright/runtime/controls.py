"""Cancel, steer and follow-up for a run that executes in another process.

The runtime applies a control to a run of its own process directly. For a run elsewhere it sends
the control through the log (`Controls.send_control`), addressed to the lease that holds the
session, and waits — at most `wait` seconds — for that run to take it (`delivered`). The run
applies it as a control of its own process (`LiveRun.apply`). What the sender learns:

- a cancel: whether the run ended cancelled. Taken, the answer is the run's next `done`, read
  from the log (True when it is `aborted`, as for a run here; True too when the wait runs out
  after the run took it: it is ending). Not taken — no run held the session, the run ended
  first, or the wait ran out (the control is then withdrawn, so it never lands late) — False.
- a steer or a follow-up always lands: taken by the run in progress — the sender then waits
  (within the same bound) until the run logged it as `steering:queued`, so that, as for a run
  here, it returns once the steer is in the log — or, when no run holds the session or the one
  that did ended first, logged for the session's next run, as a steer to an idle session is.
  `SessionBusy` only when a run holds the session and has not taken it within the wait
  (withdrawn: it never lands).
"""

from __future__ import annotations

import asyncio
import logging
from asyncio import Lock
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal

from .. import events as ev
from ..errors import SessionBusy
from ..store import SessionStatus, StoredEvent, StoreError
from ..store.log import Controls, EventLog, QueuedControl, SessionKey, Store
from .commits import Settings

logger = logging.getLogger("loopwright.runtime")


async def cancel_elsewhere(log: Store, key: SessionKey, wait: float) -> bool:
    """Cancel the session's run in another process (see the module docstring)."""
    before = (await log.session(key)).last_seq  # `UnknownSession` for an unknown key
    control = await log.send_control(key, "cancel")
    if control is None:
        return False
    try:
        async with asyncio.timeout(wait):
            if not await log.delivered(control):
                return False
            return await _ended_cancelled(log, key, before)
    except TimeoutError:
        return not await log.withdraw(control)


async def log_for_next_run(
    log: Store, key: SessionKey, settings: Settings, event: ev.Event
) -> None:
    """Log `event` for the session's next run (what a cancel dropped from its queue) under a
    lease of its own, the session left as it was. `SessionBusy` while a run holds it."""
    status: SessionStatus = "paused" if (await log.session(key)).status == "paused" else "idle"
    claimed = await log.claim(key, settings.owner, ttl=settings.lease_seconds)
    try:
        await log.append(claimed.lease, [event])
    finally:
        await log.release(claimed.lease, "interrupted" if claimed.died else status)


async def log_later(
    log: Store, key: SessionKey, settings: Settings, event: ev.Event, lock: Lock
) -> None:
    """`log_for_next_run` for a session's journal none of whose runs holds the session: under
    `lock`, which the journal holds as a run of its lets its lease go; a failure is logged."""
    try:
        async with lock:
            await log_for_next_run(log, key, settings, event)
    except (SessionBusy, StoreError) as exc:
        logger.warning("session %s: %s was not logged: %s", key.id, event.type, exc)


async def queue_elsewhere(
    log: Store,
    key: SessionKey,
    text: str,
    mode: Literal["steer", "follow_up"],
    wait: float,
    log_for_next_run: Callable[[], Awaitable[None]],
) -> None:
    """Deliver a steer or follow-up to the session's run in another process, or log it for the
    next run (`log_for_next_run`, which raises `SessionBusy` while a run holds the session)."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        before = (await log.session(key)).last_seq
        control = await log.send_control(key, mode, text)
        if control is not None and await _taken(log, control, deadline):
            await _queued(log, key, before, text, mode, deadline)
            return
        try:
            await log_for_next_run()
            return
        except SessionBusy:  # a run started meanwhile: the control goes to that one
            if asyncio.get_running_loop().time() >= deadline:
                raise


async def _taken(log: Controls, control: QueuedControl, deadline: float) -> bool:
    """Whether the run took the control by `deadline` (withdrawn otherwise: `SessionBusy` when
    its run still holds the session)."""
    try:
        async with asyncio.timeout_at(deadline):
            return await log.delivered(control)
    except TimeoutError:
        if await log.withdraw(control):
            raise SessionBusy(
                f"session {control.key.id}: its run in another process did not take the "
                f"{control.kind.replace('_', '-')} in time"
            ) from None
        return True


async def _queued(
    log: EventLog,
    key: SessionKey,
    before: int,
    text: str,
    mode: Literal["steer", "follow_up"],
    deadline: float,
) -> None:
    """Until the run logged the steer it took; `SessionBusy` when it ended cancelled first, or
    did not log it by `deadline` (a run refuses a steer as its cancel ends it)."""
    events = log.follow(key, after=before)
    try:
        async with asyncio.timeout_at(deadline):
            async for stored in events:
                event = stored.event
                if isinstance(event, ev.SteeringQueued) and (event.text, event.mode) == (
                    text,
                    mode,
                ):
                    return
                if isinstance(event, ev.Done):
                    if event.stop_reason == "aborted":  # (a cancel drops what is queued)
                        raise SessionBusy(
                            f"session {key.id}'s run was cancelled before it took the "
                            f"{mode.replace('_', '-')}: send it again once the run has ended"
                        )
                    return  # it ended first (the steer waits in its session for the next run)
    except TimeoutError:
        raise SessionBusy(
            f"session {key.id}: its run in another process took the {mode.replace('_', '-')} "
            "but did not log it in time (it may be ending after a cancel): send it again once "
            "the run has ended"
        ) from None
    finally:
        await _close(events)


async def _ended_cancelled(log: EventLog, key: SessionKey, before: int) -> bool:
    """Whether the run's next `done` after seq `before` says it was cancelled."""
    events = log.follow(key, after=before)
    try:
        async for stored in events:
            if isinstance(stored.event, ev.Done):
                return stored.event.stop_reason == "aborted"
        return False
    finally:
        await _close(events)


async def _close(events: AsyncIterator[StoredEvent]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


async def log_queued(
    log: Store,
    key: SessionKey,
    text: str,
    mode: Literal["steer", "follow_up"],
    settings: Settings,
) -> None:
    """Log a steer or follow-up for the session's next run (`SessionBusy` while a run holds
    it)."""
    record = await log.session(key)
    claimed = await log.claim(key, settings.owner, ttl=settings.lease_seconds)
    status: SessionStatus = "paused" if record.status == "paused" else "idle"
    try:
        await log.append(claimed.lease, [ev.SteeringQueued(text=text, mode=mode)])
    finally:
        await log.release(claimed.lease, "interrupted" if claimed.died else status)
