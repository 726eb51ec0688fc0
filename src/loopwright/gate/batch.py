"""A reply's batch of calls as it is decided, in values: what deciding it produced (`Batch`), a
call waiting for a human (`Pending`), a call that ran and waits on pending items (`Suspended`),
a paused batch (`Checkpoint`: a view of the state's open batch) and what resolving a pending
item did (`Resolution`); and `record`, the events of a result that did not come from running the
tool (an unknown tool, a denial, a skip, an interrupted call). `decide.Decider` makes and reads
them; `rulebook` says how a decision on a pending item is recorded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import events as ev
from ..approvals import Answer, Approval, ApprovalRequest, QuestionRequest
from ..messages import ToolCall, ToolResultMessage
from ..tools import Scheduled, Tool
from .rulebook import read


def record(
    call: ToolCall,
    content: str,
    status: str,
    *,
    args: dict[str, Any] | None = None,
    detail: str | None = None,
) -> list[ev.Event]:
    """The events of a result that did not come from running the tool (an unknown tool, a
    denial, a skip...): its output (which the run's state records) and its status."""
    is_error = status != "Approved."
    return [
        ev.ToolOutput(id=call.id, tool=call.name, content=content, is_error=is_error),
        ev.ToolResult(
            id=call.id, tool=call.name, status_text=status, args=args, detail_text=detail
        ),
    ]


@dataclass(slots=True)
class Batch:
    """What deciding a reply's calls produced."""

    scheduled: list[Scheduled] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    """Names of denied tools, in model order."""
    deferred: dict[str, Pending] = field(default_factory=dict)
    """Pending id → a call nobody could approve live."""
    closed: dict[str, Pending] = field(default_factory=dict)
    """Pending id → a deferred call a later human denial closed (SPEC §5.4: its item is skipped
    in the log at that denial, whatever `on_deny` says): skipped, never paused on."""


@dataclass(slots=True)
class Pending:
    """A call waiting for a human: an approval the gate asked for, or the agent's question."""

    request: ApprovalRequest | QuestionRequest
    tool: Tool
    checked: tuple[dict[str, Any], dict[str, Any]] | None = field(default=None, compare=False)
    """(arguments, their validated values) last checked in this process: the call runs on
    those values when it runs with those arguments (a cache: the log does not hold it)."""
    decided: Mapping[str, ev.PendingDecided] = field(default_factory=dict, compare=False)
    """The decisions its batch's state recorded (`replay.OpenBatch.decided`: a view of it)."""

    @property
    def decision(self) -> Approval | Answer | None:
        """The human's answer, once recorded (see `rulebook.read`)."""
        return read(self.decided.get(self.request.id))

    @property
    def resolved_at(self) -> str | None:
        decided = self.decided.get(self.request.id)
        return (decided.decided_at or None) if decided is not None else None


@dataclass(frozen=True, slots=True)
class Resolution:
    """What resolving a pending item did."""

    status: Literal["resolved", "already_resolved", "invalid"]
    outstanding: int
    """Items of the paused batch still waiting for a human."""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Suspended:
    """A call that ran and waits on pending items: a subagent's (in its session), or a
    question of its own (`NeedsAnswer`, in this session); it runs again when the batch
    resumes."""

    call: ToolCall
    tool: Tool
    args: dict[str, Any]
    session_id: str
    pending_ids: list[str]
    answers: dict[str, str] = field(default_factory=dict)
    """Question → answer, of the questions it asked in earlier pauses of this batch."""


@dataclass(slots=True)
class Checkpoint:
    """A paused batch: the reply's calls, the results so far, the pending items, and the calls
    suspended on another session's items — a view of the state's open batch, whose recorded
    decisions (`decided`) it reads (`rulebook` says how one is recorded).

    A denial closes it: every item still open is skipped. The run resumes when no item is open.
    """

    calls: list[ToolCall]
    results: dict[str, ToolResultMessage]
    pending: dict[str, Pending]
    decided: Mapping[str, ev.PendingDecided] = field(default_factory=dict)
    """Pending id → the decision the state recorded for it (the batch's own mapping)."""
    suspended: dict[str, Suspended] = field(default_factory=dict)
    """Call id → a call waiting on a subagent's session."""

    @property
    def closed(self) -> bool:
        """A denial closed the batch."""
        decided = self.decided
        return any((d := decided.get(i)) is not None and d.status == "denied" for i in self.pending)
