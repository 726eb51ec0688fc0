"""Live answers: how a human answers an `ask`, or the agent's question, while the run waits.

An `Approver` is any callable taking an `ApprovalRequest` and returning (or awaiting) an
`Approval` — approve, approve with edited arguments, or deny — or, for a `QuestionRequest` (the
`ask_user` tool), an `Answer`; or `DEFER` when no human is on this connection. A deferred call
becomes a pending item and the run pauses after its allowed siblings have run (SPEC §5.4); the
store turns that pause into durable state. An approver that does not answer questions (returns
anything but an `Answer`) defers them.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

from .edits import merged  # (an edit is a merge patch, on every door)
from .events import Scope
from .messages import ToolCall


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """What the approver is asked about."""

    id: str
    """The pending item's unguessable id."""
    call: ToolCall
    args: dict[str, Any]
    parameters: dict[str, Any]
    """The tool's JSON Schema, for approvers that offer to edit the arguments."""
    scope: Scope
    reason: str
    requested_at: str
    error: str | None = None
    """Why the approver's previous answer (an invalid edit) was refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionRequest:
    """The agent asks the person something (`ask_user`)."""

    id: str
    call: ToolCall
    question: str
    options: list[str] | None
    """Suggested answers; free text is always accepted."""
    agent: str
    session_id: str
    requested_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A person's answer to a question."""

    text: str
    by: str = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A human's answer. `args`, when given, is a merge patch of the call's arguments (`edits`:
    `null` removes a key); the result is validated and vetted before it runs."""

    approved: bool
    args: dict[str, Any] | None = None
    reason: str | None = None
    by: str = "user"

    @classmethod
    def approve(cls, args: dict[str, Any] | None = None, *, by: str = "user") -> Approval:
        return cls(approved=True, args=args, by=by)

    @classmethod
    def deny(cls, reason: str | None = None, *, by: str = "user") -> Approval:
        return cls(approved=False, reason=reason, by=by)


class Logged(Approval):
    """An approval the log records, the run's authority (`runtime.decisions`): its edit was
    put through the rules as it was recorded, so the run does not put it through them again
    (a gate may count its decisions)."""

    __slots__ = ()


class _Defer:
    def __repr__(self) -> str:
        return "DEFER"


DEFER: Final = _Defer()
"""Returned by an approver when no human can answer now: the call becomes a pending item."""

ApproverResult: TypeAlias = "Approval | Answer | _Defer"
Request: TypeAlias = ApprovalRequest | QuestionRequest
Approver: TypeAlias = Callable[[Request], "ApproverResult | Awaitable[ApproverResult]"]


def approve_all(request: Request) -> Approval | _Defer:
    """An approver that says yes to every approval (tests and trusted scripts); it leaves
    questions to someone else."""
    return Approval.approve(by="approve_all") if isinstance(request, ApprovalRequest) else DEFER


def deny_all(request: Request) -> Approval | _Defer:
    """An approver that says no to every approval."""
    if isinstance(request, QuestionRequest):
        return DEFER
    return Approval.deny("denied by deny_all", by="deny_all")


MAX_INVALID_EDITS = 5


async def ask_human(
    approver: Approver | None,
    request: Request,
    vet: Callable[[dict[str, Any], bool], object],
) -> Approval | Answer | _Defer:
    """Ask the live approver until it answers validly; DEFER when there is no approver.

    An approval with edited arguments that `vet` refuses (it raises `ValueError` saying why:
    invalid, or denied by the rules) is refused: the approver is asked again with
    `request.error` saying why (the call stays pending). `vet(args, recorded)` is told when
    the edit was vetted already as the log recorded it (`Logged`).
    """
    if approver is None:
        return DEFER
    if isinstance(request, QuestionRequest):
        reply = approver(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply if isinstance(reply, Answer) else DEFER
    for _ in range(MAX_INVALID_EDITS):
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if not (isinstance(answer, Approval) and answer.approved and answer.args is not None):
            return answer
        edit = answer.args if isinstance(answer, Logged) else merged(request.args, answer.args)
        answer = replace(answer, args=edit)
        try:
            vet(edit, isinstance(answer, Logged))
            return answer
        except ValueError as exc:
            request = replace(request, error=str(exc))
    return Approval.deny(f"{MAX_INVALID_EDITS} refused edits in a row", by="loopwright")


def copied(args: dict[str, Any]) -> dict[str, Any]:
    """Edited arguments detached from the approver's dict (what cannot be copied is invalid)."""
    try:
        return copy.deepcopy(args)
    except Exception:
        return args


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds (`2026-11-30T14:46:55.123Z`)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
