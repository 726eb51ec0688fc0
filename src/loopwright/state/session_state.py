"""What a session is, as its log defines it: `SessionState` — the history, the carry-over, the
queue of steering and follow-ups, the batch still open (`OpenBatch`), whether the last run
paused, finished or died — and the two views derived from it on each read, never stored: the
checkpoint of a paused batch (`checkpoint`, which a run resumes) and the recovery of the batch
a run that died left. `replay.apply` is the only writer of its facts from the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import events as ev
from ..approvals import ApprovalRequest, QuestionRequest
from ..gate.batch import Checkpoint, Pending, Suspended
from ..messages import Recovery, ToolCall, ToolResultMessage
from ..tools import Tool
from .history import History

Asked = ev.ApprovalPending | ev.QuestionPending


@dataclass(slots=True)
class OpenBatch:
    """The calls of the last reply with tools, until each has its result."""

    calls: list[ToolCall]
    results: dict[str, ToolResultMessage] = field(default_factory=dict)
    """Call id → its result, in the order the results came."""
    started: set[str] = field(default_factory=set)
    """Calls whose intent was committed (`tool:started`): they may have had effects."""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Call id → the arguments it last started with (an approver may have edited them)."""
    asked: dict[str, Asked] = field(default_factory=dict)
    """Pending id → its announcement, in the order they were asked."""
    asked_call: dict[str, str] = field(default_factory=dict)
    """Pending id → the call it is about (`pending:requested`)."""
    decided: dict[str, ev.PendingDecided] = field(default_factory=dict)
    """Pending id → the first decision recorded for it."""
    suspended: dict[str, ev.ToolSuspended] = field(default_factory=dict)
    """Call id → what it waits on, until it starts again."""
    answers: dict[str, str] = field(default_factory=dict)
    """Pending id → the answer to a question, as the run took it (`question:resolved`)."""
    checked: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Pending id → the (arguments, validated values) a run of this process checked live for
    a call it paused on (`decide.Pending.checked`): a cache the log does not hold, never
    snapshotted; the checkpoint's items carry it."""

    @classmethod
    def of(cls, calls: list[ToolCall]) -> OpenBatch:
        """`OpenBatch(calls)` for a third of the work (every reply with calls opens one)."""
        batch = _new(cls)
        batch.calls, batch.results, batch.started, batch.args = calls, {}, set(), {}
        batch.asked, batch.asked_call, batch.decided, batch.suspended = {}, {}, {}, {}
        batch.answers, batch.checked = {}, {}
        return batch


_new = object.__new__


Queue = list[tuple[Literal["steer", "follow_up"], str]]


@dataclass(slots=True)
class SessionState:
    """A session's state as its log defines it (see the module docstring)."""

    tools: Mapping[str, Tool] = field(default_factory=dict, compare=False, repr=False)
    """The agent's tools by name, for the checkpoint of a paused batch."""
    history: History = field(default_factory=History)
    batch: OpenBatch | None = None
    paused: bool = False
    """The last run ended with `loop:paused`."""
    finished: bool = False
    """The last run reached its `done`."""
    carry_over: str | None = None
    """A note for the next run about a reply that was cut off (SPEC §3.9)."""
    queued: Queue = field(default_factory=list)
    """Steering and follow-up messages sent and not delivered yet, oldest first."""
    replies: int = 0
    """The model's replies so far (`message:completed`), counted alike live and from the log:
    with a call's place in the last one, what makes its idempotency key (`loop.keys`)."""
    agent: str | None = None
    """The active agent after a handoff (`agent:handoff`); None: the session's first."""
    handoff_call: str | None = None
    """The transfer call the last handoff acted on (`loop.handoff.due` acts on each once)."""
    died: bool = False
    """The last run's process stopped before its `done` (its lease expired): known when the
    state is read from its log (`continued`), not from its events; the next run clears it."""

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The paused batch as a run resumes it: a view of `batch`, derived on each read
        (`LookupError` when a paused call's tool no longer exists)."""
        batch = self.batch
        return checkpoint(batch, self.tools) if batch is not None and self.paused else None

    @property
    def recovery(self) -> Recovery | None:
        """The unfinished batch of a run that died (derived on each read), or None."""
        if not self.died or self.finished or (self.paused and self.batch is not None):
            return None
        batch = self.batch
        return Recovery(
            calls=batch.calls if batch else [],
            results=dict(batch.results) if batch else {},
            started=set(batch.started) if batch else set(),
            args=dict(batch.args) if batch else {},
        )


def checkpoint(batch: OpenBatch, tools: Mapping[str, Tool]) -> Checkpoint:
    """A paused batch as the run resumes it, a view of the batch (whose recorded decisions its
    items read): its pending items and its suspended calls, each with its tool looked up by
    name (`LookupError` when it is gone)."""
    calls = {c.id: c for c in batch.calls}
    pending: dict[str, Pending] = {}
    for pending_id, announced in batch.asked.items():
        call = calls[batch.asked_call[pending_id]]
        waits = batch.suspended.get(call.id)
        if call.id in batch.results or (
            call.id in batch.started and (waits is None or pending_id not in waits.pending_ids)
        ):
            continue  # decided before the pause (it ran, or runs again as a suspended call)
        tool = tools.get(call.name)
        if tool is None:
            raise LookupError(f"tool {call.name!r} of a paused call no longer exists")
        request = _request(pending_id, call, announced, tool)
        checked = batch.checked.get(pending_id)
        pending[pending_id] = Pending(request, tool, checked, decided=batch.decided)
    suspended = {}
    for call_id, waits in batch.suspended.items():
        tool = tools.get(waits.tool)
        if tool is None:
            raise LookupError(f"tool {waits.tool!r} of a suspended call no longer exists")
        args = batch.args.get(call_id, calls[call_id].args)
        answers = {  # of the questions it asked in earlier pauses of this batch
            announced.question: batch.answers[pending_id]
            for pending_id, announced in batch.asked.items()
            if batch.asked_call.get(pending_id) == call_id and pending_id in batch.answers
            if isinstance(announced, ev.QuestionPending)
        }
        suspended[call_id] = Suspended(
            calls[call_id], tool, args, waits.session_id, list(waits.pending_ids), answers
        )
    return Checkpoint(
        calls=batch.calls,
        results=batch.results,  # (the batch's own: a view, as its decisions are)
        pending=pending,
        decided=batch.decided,
        suspended=suspended,
    )


def _request(
    pending_id: str, call: ToolCall, announced: Asked, tool: Tool
) -> ApprovalRequest | QuestionRequest:
    if isinstance(announced, ev.QuestionPending):
        return QuestionRequest(
            id=pending_id,
            call=call,
            question=announced.question,
            options=announced.options,
            agent=announced.agent,
            session_id=announced.session_id or "",
            requested_at=announced.requested_at,
        )
    return ApprovalRequest(
        id=pending_id,
        call=call,
        args=announced.args,
        parameters=tool.parameters,
        scope=announced.scope,
        reason=announced.reason,
        requested_at=announced.requested_at,
    )
