"""The end of a run going on in another process, as a decision made here waits for it.

A decision recorded here for a run that waits on it elsewhere (a client holds its stream on
another server) is answered with that run's `done`, read from the log. That process may die
first: nobody writes the `done`, and its lease expires. So while it waits, the answer looks at
the session every third of a lease; once no run holds it and no `done` came, this process takes
the session over (`Runtime.take_over`): a run that died waiting on a human, its calls not yet
started, is logged paused and resumed here with the decision, and the answer is that run's
`done`. Otherwise the answer is a 409 that says the run died (the decision stays recorded; the
session's next message shows the dead run's calls interrupted).
"""

from __future__ import annotations

import asyncio

from .. import events as ev
from ..store.log import SessionKey
from .state import State
from .views import ApiError

DIED = (
    "the run of session {session} waiting on {item} stopped before it went on (its process "
    "died): the decision is recorded; the session's next message shows its calls interrupted"
)


async def next_done(state: State, root: SessionKey, before: int, item: str) -> ev.Done | None:
    """The first `done` of the top-level session `root` after seq `before` (None if the log
    stops following it); `ApiError` 409 when the run stopped without one (see the module)."""
    every = state.runtime.settings.lease_seconds / 3
    done = asyncio.ensure_future(_first_done(state, root, before))
    try:
        while True:
            finished, _ = await asyncio.wait((done,), timeout=every)
            if finished:
                return done.result()
            if await _died(state, root, before):  # taken over here, it goes on with the decision
                live = await state.runtime.take_over(root)
                if live is None:
                    raise ApiError(409, DIED.format(session=root.id, item=item))
                return await live.wait()
    finally:
        done.cancel()
        await asyncio.gather(done, return_exceptions=True)


async def _first_done(state: State, root: SessionKey, before: int) -> ev.Done | None:
    events = state.log.follow(root, after=before)
    try:
        async for stored in events:
            if isinstance(stored.event, ev.Done):
                return stored.event
        return None
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


async def _died(state: State, root: SessionKey, before: int) -> bool:
    """Whether the session's run stopped without a `done` after `before`: no run holds it
    (here or in a live process), and the log has no `done` past `before`."""
    if state.runtime.live.get(root) is not None:
        return False
    if (await state.runtime.session(root)).status == "running":
        return False
    stored = await state.log.read(root, after=before)
    return not any(isinstance(s.event, ev.Done) for s in stored)
