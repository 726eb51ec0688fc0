"""A session's lifecycle as a runtime sees it: created, its status changing, disposed.

These are notifications of facts the durable log already holds, published by a runtime
(`runtime.lifecycle`) to whoever subscribes; they are never appended to a session's log, so a
run's event grammar is untouched, and a session's status is always recomputable after a
restart from its stored row (`SessionRecord.status`: `idle`, `running`, `paused`,
`interrupted`), with `waiting` the one live refinement of `running` (a run of this process is
held on a decision someone is about to make). Additive: the full profile only; v1 has none.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from ._values import value

SessionStatusName: TypeAlias = Literal["idle", "running", "waiting", "paused", "interrupted"]
DisposedReason: TypeAlias = Literal["evicted", "handed_over", "failed", "closed"]


@value
class ForkSource:
    """The session a fork was copied from, and the seq it was copied up to."""

    session_id: str
    seq: int


@value
class SessionCreated:
    """A session came into being: its first run's input is in the log, or it was forked."""

    tenant: str
    agent: str
    session_id: str
    forked_from: ForkSource | None = None
    type: Literal["session:created"] = "session:created"


@value
class SessionStatusChanged:
    """A session's status changed: `running` as a run starts or resumes, `waiting` while that
    run waits on a decision (an approval or a question), `paused` when it stopped durably on
    open items, `idle` when it ended otherwise, `interrupted` when it ended without its end
    recorded. `previous` is None when this runtime knew no status for it before."""

    tenant: str
    agent: str
    session_id: str
    status: SessionStatusName
    previous: SessionStatusName | None = None
    type: Literal["session:status"] = "session:status"


@value
class SessionDisposed:
    """The runtime let go of the session's in-memory state (the durable session stays):
    `evicted` from its cache of sessions, `handed_over` to another process that took its run,
    `failed` (its run ended on an error), or `closed` with the runtime."""

    tenant: str
    agent: str
    session_id: str
    reason: DisposedReason
    type: Literal["session:disposed"] = "session:disposed"


LifecycleEvent: TypeAlias = SessionCreated | SessionStatusChanged | SessionDisposed
