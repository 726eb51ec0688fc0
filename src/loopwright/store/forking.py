"""A fork: a new session whose log is another's events 1..seq, made in one transaction (written
once for both backends, as a `sql` program: `EventLog.fork`).

The new session's log is the source's first `at` events, as they were, but for what names the
session or its pending items: the `session` event (and a question's or a suspension's session)
names the fork, and every pending item raised in the copy gets a fresh id (ids are unique per
log), in every event that names it. So the fork replays, exports and reads as any session, and
an item left open at `at` is open in the fork too, for a decision of its own.

What the copy derives is derived as an append would (`derive`) but for two things:

- no usage rows: the copied replies were billed to the source, and are not billed again (the
  fork's usage is what it spends after `at`);
- no notices in the outbox for items decided within the copy (nothing waits on them): an item
  left open is a new item, and notified as one.

A fork whose copy ends inside a run (its `done` not copied) is stored as `interrupted`: it
reads, and is recovered when it next runs, exactly as a run that died at `at`. Its lineage —
the source session and `at` — is kept on its row (`forked_from`, `forked_at`), and so is the
source's stored title (`store.titles`): the fork begins with the same first message, so it is
the same conversation's title (a fork without one shows that first message, as its source).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace

from .. import events as ev
from ..errors import LoopwrightError
from ..wire import dumps_all, loads
from .derive import DecidePending, NewPending, NewUsage, Op, SessionRow, derive
from .log import SessionKey
from .sql import Dialect, Do, Now, Program, Rows, astuple, derived_rows, iso, unknown

DECIDE = (
    "UPDATE {pending} SET status = ?, decided_by = ?, decided_at = ?, edited_args = ?, "
    "answer = ?, note = ? WHERE id = ? AND session = ? AND status = 'open'"
)


class CannotFork(LoopwrightError):
    """The fork is refused: `at` is not a seq of the source (`why == "seq"`), the new session's
    id is in use (`"exists"`) or not a valid id (`"id"`, `runtime.forking`)."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def copied(events: Sequence[ev.Event], source: str, new: str) -> list[ev.Event]:
    """`events` as the fork `new` of session `source` logs them (the module docstring)."""
    ids: dict[str, str] = {}
    for event in events:
        if isinstance(event, ev.ApprovalPending | ev.QuestionPending):
            ids[event.id] = event.id.partition("_")[0] + "_" + secrets.token_urlsafe(18)

    def named(session_id: str) -> str:
        return new if session_id == source else session_id

    out: list[ev.Event] = []
    for event in events:
        match event:
            case ev.Session():
                event = replace(event, session_id=named(event.session_id))
            case ev.QuestionPending(session_id=sid):
                event = replace(event, id=ids[event.id], session_id=sid and named(sid))
            case ev.ToolSuspended() | ev.LoopPaused():
                kept = [ids.get(i, i) for i in event.pending_ids]
                event = replace(event, pending_ids=kept)
                if isinstance(event, ev.ToolSuspended):
                    event = replace(event, session_id=named(event.session_id))
            case (
                ev.ApprovalPending()
                | ev.PendingRequested()
                | ev.PendingDecided()
                | ev.ApprovalResolved()
                | ev.QuestionResolved()
            ):
                event = replace(event, id=ids.get(event.id, event.id))
        out.append(event)
    return out


def copy_rows(d: Dialect, ops: Sequence[Op], sid: int, tenant: str, at: str) -> list[Do]:
    """The rows the copy's `ops` (`derive`) write (the module docstring): no usage, no notices
    of decided items."""
    decided = {op.id for op in ops if isinstance(op, DecidePending)}
    rows: list[Do] = []
    for op in ops:
        if isinstance(op, NewUsage):
            continue
        if isinstance(op, DecidePending):  # (PostgreSQL's statement notifies too: not this)
            rows.append(Do(d(DECIDE), derived_rows(d, [op], sid, tenant, at)[0].params[:8]))
        elif isinstance(op, NewPending) and op.id in decided:
            rows += derived_rows(d, [op], sid, tenant, at)[:1]  # the row, not its notice
        else:
            rows += derived_rows(d, [op], sid, tenant, at)
    return rows


def fork(
    source: SessionKey, at: int, new_id: str, now: Now
) -> Callable[[Dialect], Program[SessionKey]]:
    """The program making the fork `new_id` of `source` at seq `at`, in a backend's dialect."""
    return lambda d: _fork(d, source, at, new_id, now)


def _fork(d: Dialect, source: SessionKey, at: int, new_id: str, now: Now) -> Program[SessionKey]:
    """Create the fork `new_id` of `source` at seq `at` (in the caller's write transaction);
    returns its key. `UnknownSession` for an unknown or foreign `source`;
    `CannotFork` for a seq out of range or an id in use."""
    rows = yield Rows(
        d(
            "SELECT id, last_seq, {now}, title FROM {sessions} "
            "WHERE tenant = ? AND agent = ? AND name = ?"
        ),
        astuple(source),
    )
    if not rows:
        raise unknown(source)
    src, last_seq, db_now, title = rows[0]
    if not 1 <= at <= last_seq:
        raise CannotFork(
            f"seq {at} is not in session {source.id!r} (its events are 1..{last_seq})", "seq"
        )
    read = yield Rows(
        d("SELECT data FROM {events} WHERE session = ? AND seq <= ? ORDER BY seq"), (src, at)
    )
    events = copied([loads(data) for (data,) in read], source.id, new_id)
    derived = derive(SessionRow(0, 0, "idle"), events)
    state = derived.state
    status = "interrupted" if state.status == "running" else state.status
    stamp = iso(now(db_now))
    key = SessionKey(source.tenant, source.agent, new_id)
    made = yield Rows(
        d(
            "INSERT INTO {sessions} (tenant, agent, name, status, last_seq, last_reply_seq, "
            "epoch, forked_from, forked_at, title, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, agent, name) DO NOTHING RETURNING id"
        ),
        (*astuple(key), status, state.last_seq, state.last_reply_seq, src, at, title, stamp, stamp),
    )
    if not made:
        raise CannotFork(f"session id {new_id!r} is in use", "exists")
    sid = made[0][0]
    texts = dumps_all(events)
    yield Do(
        d.insert_events,
        [(sid, n, e.type, t, stamp) for n, (e, t) in enumerate(zip(events, texts, strict=True), 1)],
        many=True,
    )
    yield from copy_rows(d, derived.ops, sid, source.tenant, stamp)
    return key
