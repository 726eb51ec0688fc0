"""Live approval: how a human answers an `ask` while the run waits.

An `Approver` is any callable taking an `ApprovalRequest` and returning (or awaiting) an
`Approval` — approve, approve with edited arguments, or deny — or `DEFER` when no human is on
this connection. A deferred call becomes a pending item and the run pauses after its allowed
siblings have run (SPEC §5.4); the store turns that pause into durable state.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

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
class Approval:
    """A human's answer. `args` replaces the call's arguments when given (validated first)."""

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


class _Defer:
    def __repr__(self) -> str:
        return "DEFER"


DEFER: Final = _Defer()
"""Returned by an approver when no human can answer now: the call becomes a pending item."""

ApproverResult: TypeAlias = "Approval | _Defer"
Approver: TypeAlias = Callable[[ApprovalRequest], "ApproverResult | Awaitable[ApproverResult]"]


def approve_all(request: ApprovalRequest) -> Approval:
    """An approver that says yes to everything (tests and trusted scripts)."""
    return Approval.approve(by="approve_all")


def deny_all(request: ApprovalRequest) -> Approval:
    """An approver that says no to everything."""
    return Approval.deny("denied by deny_all", by="deny_all")


MAX_INVALID_EDITS = 5


async def ask_human(
    approver: Approver | None,
    request: ApprovalRequest,
    validate: Callable[[dict[str, Any]], object],
) -> Approval | _Defer:
    """Ask the live approver until it answers validly; DEFER when there is no approver.

    An approval with edited arguments that fail `validate` is refused: the approver is asked
    again with `request.error` saying why (the call stays pending).
    """
    if approver is None:
        return DEFER
    for _ in range(MAX_INVALID_EDITS):
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if not (isinstance(answer, Approval) and answer.approved and answer.args is not None):
            return answer  # type: ignore[return-value]
        try:
            validate(answer.args)
            return answer
        except ValueError as exc:
            request = replace(request, error=f"edited arguments are invalid: {exc}")
    return Approval.deny(f"{MAX_INVALID_EDITS} invalid edits in a row", by="loopwright")


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds (`2026-11-30T14:46:55.123Z`)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
