"""A session's history, rebuilt from its log alone.

Replays the committed events: inputs and steering become user messages, `message:completed`
replies become assistant messages, `tool:output`s become results appended in call order when
their batch closes. A paused batch becomes the checkpoint (with the decisions recorded since); the
unfinished batch of a run that died becomes the recovery the next run completes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from .. import events as ev
from ..approvals import Answer, Approval, ApprovalRequest, QuestionRequest
from ..compaction import apply as apply_compaction
from ..decide import Checkpoint, Pending, Recovery, Suspended
from ..messages import History, ToolCall, ToolResultMessage
from ..tools import Tool
from . import PendingRecord, StoredEvent


class _Batch:
    def __init__(self, calls: list[ToolCall]) -> None:
        self.calls = calls
        self.results: dict[str, ToolResultMessage] = {}
        self.started: set[str] = set()
        self.asked: dict[str, ev.ApprovalPending | ev.QuestionPending] = {}
        self.asked_call: dict[str, str] = {}
        self.args: dict[str, dict[str, Any]] = {}
        self.suspended: dict[str, ev.ToolSuspended] = {}


def rebuild(
    stored: Iterable[StoredEvent],
    tools: Mapping[str, Tool],
    decisions: Mapping[str, PendingRecord],
    *,
    died: bool,
) -> History:
    """The history a run continues from. `decisions` are the session's pending items by id;
    `died` says the last run's process stopped before it finished."""
    history = History()
    batch: _Batch | None = None
    paused = finished = False

    def close() -> None:
        nonlocal batch
        if batch is not None and all(c.id in batch.results for c in batch.calls):
            for call in batch.calls:
                history.append(batch.results[call.id])
            batch = None

    for item in stored:
        event = item.event
        match event:
            case ev.InputReceived(message=message) | ev.SteeringInjected(message=message):
                close()
                history.carry_over = None
                history.append(message)
                if isinstance(event, ev.SteeringInjected):
                    with contextlib.suppress(ValueError):
                        history.queued.remove((event.mode, message.content))
            case ev.SteeringQueued(text=text, mode=mode):
                history.queued.append((mode, text))
            case ev.MessageCompleted(message=message):
                close()
                history.carry_over = None
                history.append(message)
                history.note_usage(message.usage)
                batch = _Batch(message.tool_calls) if message.tool_calls else None
            case ev.ToolStarted(id=call_id, args=args) if batch is not None:
                batch.started.add(call_id)
                batch.args[call_id] = args
                batch.suspended.pop(call_id, None)
            case ev.ToolSuspended(id=call_id) if batch is not None:
                batch.suspended[call_id] = event
            case ev.ToolOutput() if batch is not None:
                batch.results[event.id] = ToolResultMessage(
                    call_id=event.id,
                    tool=event.tool,
                    content=event.content,
                    is_error=event.is_error,
                )
            case ev.ApprovalPending() | ev.QuestionPending() if batch is not None:
                batch.asked[event.id] = event
            case ev.PendingRequested(id=pending_id, call_id=call_id) if batch is not None:
                batch.asked_call[pending_id] = call_id
            case ev.StepFinished():
                close()
            case ev.CompactionFinished():
                close()
                apply_compaction(history, event)
            case ev.LoopAborted(carry_over=carry):
                history.carry_over = carry
                history.queued.clear()  # a cancel drops what was queued, as it does live
            case ev.MessagePartial(text=text):
                history.carry_over = text
            case ev.Session():
                paused = finished = False
            case ev.Done():
                finished = True
            case ev.LoopPaused():
                paused = True
            case _:
                pass
    close()
    if batch is not None and paused:
        history.checkpoint = _checkpoint(batch, tools, decisions)
    elif died and not finished:
        history.recovery = Recovery(
            calls=batch.calls if batch else [],
            results=batch.results if batch else {},
            started=batch.started if batch else set(),
        )
    return history


def _checkpoint(
    batch: _Batch, tools: Mapping[str, Tool], decisions: Mapping[str, PendingRecord]
) -> Checkpoint:
    calls = {c.id: c for c in batch.calls}
    pending: dict[str, Pending] = {}
    closed = False
    for pending_id, announced in batch.asked.items():
        call = calls[batch.asked_call[pending_id]]
        if call.id in batch.results:
            continue  # decided live before the pause
        tool = tools.get(call.name)
        if tool is None:
            raise LookupError(f"tool {call.name!r} of a paused call no longer exists")
        request: ApprovalRequest | QuestionRequest
        if isinstance(announced, ev.QuestionPending):
            request = QuestionRequest(
                id=pending_id,
                call=call,
                question=announced.question,
                options=announced.options,
                agent=announced.agent,
                session_id=announced.session_id or "",
                requested_at=announced.requested_at,
            )
        else:
            request = ApprovalRequest(
                id=pending_id,
                call=call,
                args=announced.args,
                parameters=tool.parameters,
                scope=announced.scope,
                reason=announced.reason,
                requested_at=announced.requested_at,
            )
        item = Pending(request=request, tool=tool)
        record = decisions.get(pending_id)
        if record is not None and record.status in ("approved", "denied"):
            item.decision = Approval(
                approved=record.status == "approved",
                args=record.edited_args,
                reason=record.note,
                by=record.decided_by or "unknown",
            )
            item.resolved_at = record.decided_at
            closed = closed or record.status == "denied"
        elif record is not None and record.status == "answered":
            item.decision = Answer(text=record.answer or "", by=record.decided_by or "unknown")
            item.resolved_at = record.decided_at
        pending[pending_id] = item
    suspended = {}
    for call_id, waits in batch.suspended.items():
        tool = tools.get(waits.tool)
        if tool is None:
            raise LookupError(f"tool {waits.tool!r} of a suspended call no longer exists")
        args = batch.args.get(call_id, calls[call_id].args)
        suspended[call_id] = Suspended(
            calls[call_id], tool, args, waits.session_id, list(waits.pending_ids)
        )
    return Checkpoint(
        calls=batch.calls,
        results=dict(batch.results),
        pending=pending,
        closed=closed,
        suspended=suspended,
    )
