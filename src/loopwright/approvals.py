"""Live approval: how a human answers an `ask` while the run waits.

An `Approver` is any callable taking an `ApprovalRequest` and returning (or awaiting) an
`Approval` — approve, approve with edited arguments, or deny — or `DEFER` when no human is on
this connection. A deferred call becomes a pending item and the run pauses after its allowed
siblings have run (SPEC §5.4); the store turns that pause into durable state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
