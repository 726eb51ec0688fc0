"""A stored session replayed against today's agent (`loopwright.replays`), read from the
runtime's event log: what `loopwright replay SESSION` does for a session id.

    report = await replay_stored(runtime, SessionKey("default", "support", "s1"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..replays import ReplayReport, replay_session

if TYPE_CHECKING:
    from ..agent import Agent
    from ..models import Model
    from ..store.log import SessionKey
    from ..store.records import StoredEvent
    from .service import Runtime

PAGE = 1000
"""Events read from the log at a time."""


async def recording(runtime: Runtime, key: SessionKey) -> list[StoredEvent]:
    """The session's whole log, read a page at a time. `UnknownSession`."""
    stored: list[StoredEvent] = []
    while page := await runtime.read(key, after=stored[-1].seq if stored else 0, limit=PAGE):
        stored += page
    return stored


async def replay_stored(
    runtime: Runtime,
    key: SessionKey,
    *,
    agent: Agent | None = None,
    model: str | Model | None = None,
) -> ReplayReport:
    """Replay the stored session `key` against `agent` (the runtime's agent of its name by
    default), in memory: nothing is written to the log. `UnknownSession`."""
    stored = await recording(runtime, key)
    today = agent if agent is not None else runtime.agent(key.agent)
    return await replay_session(today, stored, model=model, tenant=key.tenant)
