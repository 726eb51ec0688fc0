"""A session's state from its log: the newest snapshot and the events after it, folded by the
reducer (`loopwright.state.replay`), and new snapshots as a session grows: of the run's own state when
it is the log's (the run applied every event the log holds), else of the log folded again.

Parsing a snapshot and folding a long tail are CPU work: they run in a thread, so that other
sessions go on meanwhile; a short log without a snapshot is folded on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from .. import events as ev
from ..state.history import History
from ..state.replay import apply, continued, fold
from ..state.session_state import OpenBatch, SessionState
from ..state.snapshots import from_snapshot, to_snapshot
from ..store import SessionStatus, StoredEvent, blobs
from ..store.log import EventLog, Lease, SessionKey, Snapshot, Store
from ..tools import Tool

logger = logging.getLogger("loopwright.runtime")

INLINE_FOLD = 500
"""Events folded on the event loop when a session opens; a longer log is folded in a thread."""


async def read_state(
    log: Store, key: SessionKey, tools: dict[str, Tool], *, died: bool, agent: Any = None
) -> tuple[SessionState, int, int]:
    """The state a run of the session continues from, its history `continued` (`died`: its
    last run stopped before its `done`), the seq it was read up to, and the seq of the
    snapshot it started from. After a handoff its tools are its active agent's, found among
    the agents the session's first, `agent`, knows (`Agent._agents`)."""
    state, after = await restore(log, key, tools)
    stored = await log.read(key, after=after)
    last = stored[-1].seq if stored else after
    if state is None and len(stored) < INLINE_FOLD:
        state = _continued(state, stored, tools, died, agent)
    else:
        state = await asyncio.to_thread(_continued, state, stored, tools, died, agent)
    await blobs.resolve(log, state)  # the attachments' bytes, for the next requests
    return state, last, after


async def restore(
    log: EventLog, key: SessionKey, tools: dict[str, Tool]
) -> tuple[SessionState | None, int]:
    """The state kept by the newest snapshot and its seq (None, 0: there is none, or it cannot
    be read, and the whole log is folded)."""
    snapshot = await log.snapshot(key)
    if snapshot is None:
        return None, 0
    try:
        state = await asyncio.to_thread(from_snapshot, snapshot.data, tools)
    except (ValueError, LookupError, TypeError) as exc:
        logger.warning("session %s: snapshot ignored (%s)", key.id, exc)
        return None, 0
    return state, snapshot.seq


async def save_snapshot(
    log: EventLog,
    lease: Lease,
    tools: dict[str, Tool],
    live: tuple[SessionState, int] | None = None,
) -> int:
    """Keep the session's state as of its log's end (under the run's lease); returns its seq.
    `live`: the run's state and the seq up to which it is the log's, kept as it is instead of
    the log being read and folded again."""
    if live is not None:
        copy = frozen(live[0])
        data = await asyncio.to_thread(to_snapshot, copy)
        live[0].history.encoded = copy.history.encoded  # (its messages' JSON, for the next)
        await log.save_snapshot(lease, Snapshot(live[1], data))
        return live[1]
    state, after = await restore(log, lease.key, tools)
    stored = await log.read(lease.key, after=after)
    if not stored:
        return after
    data = await asyncio.to_thread(_snapshot_of, state, stored, tools)
    await log.save_snapshot(lease, Snapshot(stored[-1].seq, data))
    return stored[-1].seq


def refill(
    state: SessionState, fresh: SessionState, unlogged: Sequence[ev.SteeringQueued] = ()
) -> None:
    """Replace a session's state by another in place (a run holds the state and its history);
    the state keeps its own tools (but the active agent's after a handoff: `read_state`), and
    what was queued in it but not logged (`unlogged`, `Session.unlogged`) is queued again."""
    for f in fields(History):
        setattr(state.history, f.name, getattr(fresh.history, f.name))
    for f in fields(SessionState):
        if f.name != "history" and (f.name != "tools" or fresh.agent is not None):
            setattr(state, f.name, getattr(fresh, f.name))
    for queued in unlogged:
        apply(state, queued)


def is_paused(state: SessionState) -> bool:
    """Whether the session is paused on a batch (it has a `checkpoint`), without deriving it."""
    return state.paused and state.batch is not None


def status_of(state: SessionState) -> SessionStatus:
    """The session's status in the store as its state leaves it (no run holds it)."""
    return "paused" if is_paused(state) else "interrupted" if state.recovery else "idle"


def frozen(state: SessionState) -> SessionState:
    """A copy of the state that events applied to it later leave as it is (its messages and
    events are values: only the containers are copied)."""
    history = replace(state.history, messages=list(state.history.messages))
    batch = state.batch
    if batch is not None:
        batch = OpenBatch(
            list(batch.calls),
            dict(batch.results),
            set(batch.started),
            dict(batch.args),
            dict(batch.asked),
            dict(batch.asked_call),
            dict(batch.decided),
            dict(batch.suspended),
            dict(batch.answers),
        )
    return replace(state, history=history, batch=batch, queued=list(state.queued))


def _continued(
    state: SessionState | None,
    stored: list[StoredEvent],
    tools: dict[str, Tool],
    died: bool,
    agent: Any = None,
) -> SessionState:
    state = fold((s.event for s in stored), tools, state)
    active = agent._agents.get(state.agent) if agent is not None and state.agent else None
    if active is not None:  # handed off: a paused call's tool is the active agent's
        state.tools = active._by_name
    continued(state, died=died)
    return state


def _snapshot_of(
    state: SessionState | None, stored: list[StoredEvent], tools: dict[str, Tool]
) -> str:
    return to_snapshot(fold((s.event for s in stored), tools, state))
