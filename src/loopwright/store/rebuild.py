"""A session's history, rebuilt from its log alone, by the reducer (`loopwright.replay`).

Today's store keeps the decisions on pending items in its `pending` table; they become the
`pending:decided` events the event log records (the first decision of an item wins, so one the
log already holds stands). A paused batch becomes the checkpoint with those decisions; the
unfinished batch of a run that died becomes the recovery the next run completes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .. import events as ev
from ..messages import History
from ..replay import apply, continued, fold
from ..tools import Tool
from . import PendingRecord, StoredEvent


def rebuild(
    stored: Iterable[StoredEvent],
    tools: Mapping[str, Tool],
    decisions: Mapping[str, PendingRecord],
    *,
    died: bool,
) -> History:
    """The history a run continues from. `decisions` are the session's pending items by id;
    `died` says the last run's process stopped before it finished."""
    state = fold((item.event for item in stored), tools)
    for record in decisions.values():
        decided = decided_event(record)
        if decided is not None:  # decided after the log's events: only the last batch's count
            apply(state, decided)
    return continued(state, died=died)


def decided_event(record: PendingRecord) -> ev.PendingDecided | None:
    """The `pending:decided` event a decided pending row stands for (None while it is open)."""
    if record.status == "open":
        return None
    return ev.PendingDecided(
        id=record.id,
        status=record.status,
        by=record.decided_by or "unknown",
        decided_at=record.decided_at or "",
        args=record.edited_args,
        answer=record.answer,
        reason=record.note,
    )
