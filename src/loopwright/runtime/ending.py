"""What a decision leads to: the `done` of the run that goes on after it, wherever it runs, and
the sessions whose decided batch no run went on with.

A decision that closes a batch makes a run go on: one of this process (resumed here, or waiting
here on the item), or one elsewhere (a client holds its stream on another server, a terminal
waits at its prompt). Every door tells the decider how it ended (`Runtime.went_on`):

- the session's log is followed from the decision on, up to a `done`;
- a `done` that pauses on items all decided by now is not the end (the run was pausing as the
  decision came: its holder let go): the run goes on, resumed by the process that paused it
  (`Runtime._after`), else taken over below, and the next `done` is waited for;
- every third of a lease, when no run holds the session (here, or under a live lease elsewhere)
  and no `done` came, its process died: this process takes the session over
  (`Runtime.take_over`): a run that died waiting on a human is logged paused and resumed here
  with its decisions, and that run's `done` is the answer. When nothing can go on (the dead
  run's batch was recovered: its calls show interrupted), there is none: None.

A session is *decided, not acted on* when it is paused, no run holds it, and nothing under it
is open: the decision closing its batch was recorded, and the process that was to resume it
died first. Whoever touches it next acts on it (`Runtime.act_on`): a decision made again, a new
message (the decided batch goes on first), a takeover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .. import events as ev
from ..errors import UnknownPending
from ..store.log import EventLog, ReadModels, SessionKey, Store
from .decisions import open_under
from .live import Live, LiveRun

TakeOver = Callable[[SessionKey], Awaitable[LiveRun | None]]


@dataclass(frozen=True, slots=True)
class _End:
    seq: int
    done: ev.Done
    paused: tuple[str, ...]
    """The items its run paused on (its `loop:paused`), if it paused."""


async def went_on(
    log: Store, live: Live, key: SessionKey, after: int, every: float, take_over: TakeOver
) -> ev.Done | None:
    """The `done` of the run that goes on for the top-level session `key` after seq `after`
    (see the module); None when its run died and nothing can go on."""
    while True:
        end = await _watched(log, live, key, after, every)
        if end is None:  # no run holds the session and no `done` came: its run died
            if await take_over(key) is None and await _stopped(log, live, key, after):
                return None
            continue  # (the run taken over here, or resumed meanwhile elsewhere: its `done`)
        if end.done.stop_reason != "paused" or await _open(log, key.tenant, end.paused):
            return end.done
        after = end.seq  # paused on items decided meanwhile: it goes on


async def decided(log: ReadModels, live: Live, key: SessionKey) -> bool:
    """Whether the session is decided, not acted on (see the module)."""
    if live.get(key) is not None or (await log.session(key)).status != "paused":
        return False
    return not await open_under(log, key)


async def _watched(
    log: Store, live: Live, key: SessionKey, after: int, every: float
) -> _End | None:
    """The first `done` after `after`; None once no run holds the session and none came."""
    first = asyncio.ensure_future(_first_done(log, key, after))
    try:
        while True:
            finished, _ = await asyncio.wait((first,), timeout=every)
            if finished:
                return first.result()
            if await _stopped(log, live, key, after):
                return None
    finally:
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)


async def _first_done(log: EventLog, key: SessionKey, after: int) -> _End | None:
    events = log.follow(key, after=after)
    paused: tuple[str, ...] = ()
    try:
        async for stored in events:
            if isinstance(stored.event, ev.LoopPaused):
                paused = tuple(stored.event.pending_ids)
            elif isinstance(stored.event, ev.Done):
                return _End(stored.seq, stored.event, paused)
        return None
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


async def _stopped(log: Store, live: Live, key: SessionKey, after: int) -> bool:
    """Whether no run holds the session (here or under a live lease elsewhere) and the log has
    no `done` past `after`."""
    if live.get(key) is not None or (await log.session(key)).status == "running":
        return False
    return not any(isinstance(s.event, ev.Done) for s in await log.read(key, after=after))


async def _open(log: ReadModels, tenant: str, ids: tuple[str, ...]) -> bool:
    """Whether any of the items is still open."""
    for pending_id in ids:
        try:
            if (await log.pending_item(tenant, pending_id)).status == "open":
                return True
        except UnknownPending:
            continue
    return False
