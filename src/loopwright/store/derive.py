"""What a batch of events means for the tables beside the log, computed once for every backend.

A backend hands `derive` the session's row as it stands and the events it is about to append;
`derive` returns the row as it will stand and the row operations the events imply, in event
order, and the backend applies them in the same transaction as the events:

- `approval:pending` / `question:pending` open a pending item, in the batch of the last
  `message:completed` before it (its calls are the batch); `pending:requested` names the call;
- `pending:decided` decides an open item (an item already decided stays as it is: first wins);
- `message:completed` with usage adds a usage row;
- the status says whether the run's log is finished: `done` ends it (`paused` when the run
  stopped on pending items, `idle` otherwise), any later event of a run opens it again
  (`running`); a decision is not the run's and changes nothing. So a run whose lease expired
  after its `done` needs no recovery, and one that died before it does.

`decision_events` is the other half of `decide`: the events that record one decision, as the
rule book (`loopwright.gate.rulebook`) rules it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import events as ev
from ..gate import rulebook
from .records import SessionStatus

DecidedStatus = Literal["approved", "denied", "answered", "skipped"]


@dataclass(frozen=True, slots=True)
class SessionRow:
    """The part of a session's row that events change."""

    last_seq: int
    last_reply_seq: int
    """Seq of the last `message:completed`: the batch of pending items raised after it."""
    status: SessionStatus


@dataclass(frozen=True, slots=True)
class NewPending:
    id: str
    kind: Literal["approval", "question"]
    tool: str
    args: dict[str, Any]
    reason: str
    requested_at: str
    batch_seq: int
    scope: dict[str, str] | None
    """The scope an approval was asked in (the one an edit is decided in again)."""


@dataclass(frozen=True, slots=True)
class SetCallId:
    """The call an item is about; with `tool`, the tool of that call (a question a running
    call asked, `tool:suspended`: no row matches the ids of another session's items)."""

    id: str
    call_id: str
    tool: str | None = None


@dataclass(frozen=True, slots=True)
class DecidePending:
    """Decide the item if it is still open (a backend applies it with `status = 'open'`)."""

    id: str
    status: DecidedStatus
    by: str
    decided_at: str
    edited_args: dict[str, Any] | None
    answer: str | None
    note: str | None


@dataclass(frozen=True, slots=True)
class NewUsage:
    seq: int
    model: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float | None


Op = NewPending | SetCallId | DecidePending | NewUsage


@dataclass(frozen=True, slots=True)
class Derived:
    state: SessionRow
    ops: list[Op]


def derive(state: SessionRow, events: Sequence[ev.Event]) -> Derived:
    """The row after appending `events` (seqs `state.last_seq + 1` onwards) and what they derive."""
    reply, status = state.last_reply_seq, state.status
    for event in reversed(events):  # the status: the last event's but a decision's
        if event.type != "pending:decided":  # (a decision leaves it as it was)
            status = "running"  # the run's own events: it has not ended (yet)
            if type(event) is ev.Done:
                status = "paused" if event.stop_reason == "paused" else "idle"
            break
    ops: list[Op] = []
    first = state.last_seq + 1  # (most events derive nothing: one set lookup passes them)
    for seq, event in [(n, e) for n, e in enumerate(events, first) if e.type in _DERIVING]:
        match event:
            case ev.MessageCompleted(message=message):
                reply = seq
                if message.usage is not None:
                    u = message.usage
                    ops.append(
                        NewUsage(
                            seq,
                            message.model,
                            u.input_tokens,
                            u.output_tokens,
                            u.cache_read_tokens,
                            u.cache_write_tokens,
                            u.cost,
                        )
                    )
            case ev.ApprovalPending():
                s = event.scope
                scope = {"tenant": s.tenant, "environment": s.environment, "agent": s.agent}
                ops.append(
                    NewPending(
                        event.id,
                        "approval",
                        event.tool,
                        dict(event.args),
                        event.reason,
                        event.requested_at,
                        reply,
                        scope,
                    )
                )
            case ev.QuestionPending():
                args = {"question": event.question, "options": event.options}
                ops.append(
                    NewPending(
                        event.id,
                        "question",
                        "ask_user",
                        args,
                        event.question,
                        event.requested_at,
                        reply,
                        None,
                    )
                )
            case ev.PendingRequested():
                ops.append(SetCallId(event.id, event.call_id))
            case ev.ToolSuspended():
                ops += [SetCallId(i, event.id, event.tool) for i in event.pending_ids]
            case ev.PendingDecided():
                ops.append(
                    DecidePending(
                        event.id,
                        event.status,
                        event.by,
                        event.decided_at,
                        event.args,
                        event.answer,
                        event.reason,
                    )
                )
    return Derived(SessionRow(state.last_seq + len(events), reply, status), ops)


_DERIVING = frozenset(
    {
        "message:completed",
        "approval:pending",
        "question:pending",
        "pending:requested",
        "tool:suspended",
        "pending:decided",
        "done",
    }
)
"""The event types `derive` reads (every other one only numbers its event and keeps the run
`running`)."""


def decision_events(
    pending_id: str,
    status: DecidedStatus,
    by: str,
    decided_at: str,
    *,
    edited_args: dict[str, Any] | None = None,
    answer: str | None = None,
    note: str | None = None,
    batch: Sequence[tuple[str, str, str]] = (),
) -> list[ev.PendingDecided] | None:
    """The events recording a decision, as the rule book rules it (`rulebook.rule`) on the
    rows of its item's batch — (id, kind, status), in request order — as they stand in the
    transaction that appends them; None when another decision came first. A decision the
    rule book refuses otherwise (the wrong kind of answer) is the caller's error."""
    decided = ev.PendingDecided(
        id=pending_id,
        status=status,
        by=by,
        decided_at=decided_at,
        args=edited_args,
        answer=answer,
        reason=note,
    )
    items = [rulebook.Item(i, kind, state) for i, kind, state in batch]  # type: ignore[arg-type]
    ruled = rulebook.rule(items, decided)
    if not isinstance(ruled, rulebook.Refusal):
        return ruled
    if ruled.why == "decided":
        return None
    raise ValueError(ruled.message)
