"""The rule book of decisions on pending items: the one place that says whether a decision may
be recorded and which events record it.

`rule(items, decided, edits)` is pure: given the items of the item's batch as they stand (in
request order), the decision as the log would record it (`pending:decided`) and — for an edit —
how to vet it, it returns the events that record the decision, or a `Refusal` saying why not:

- an item not in the batch is `unknown`; one already decided is `decided` (the first decision
  wins: the later one records nothing);
- an answer is for a question, an approval or a denial for an approval (a skip closes either);
- edited arguments must pass the tool's schema and the rules, in the scope the item was asked
  in (`arguments.vet_edit`; without `edits` the caller vetted them with this rule book);
- a denial closes its batch: each other open item is skipped (`closed by <id>`), in request
  order, and the items of the subagent sessions under its session are skipped too
  (`closes_under`).

The in-memory session applies the events to its state; the runtime vets a door's decision with
`refusal` before it reaches the log; each store backend applies `rule` to its pending rows and
appends the events in the transaction that read them (so the first decision wins atomically).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .. import events as ev
from ..approvals import Answer, Approval, Logged, copied
from ..edits import merged
from ..tools import Tool
from .arguments import vet_edit
from .permissions import Gate

Kind = Literal["approval", "question"]
Status = Literal["open", "approved", "denied", "answered", "skipped"]


@dataclass(frozen=True, slots=True)
class Item:
    """A pending item as a decision finds it."""

    id: str
    kind: Kind
    status: Status


@dataclass(frozen=True, slots=True)
class Edits:
    """How an approval's edited arguments are vetted: its tool (None: it no longer exists), the
    gate, and the scope the item was asked in."""

    tool: Tool | None
    gate: Gate
    scope: ev.Scope | None
    name: str = ""
    """The tool's name (what a refusal names when it no longer exists)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a decision is not recorded (`message` names the rule)."""

    why: Literal["unknown", "decided", "wrong_kind", "invalid_edit"]
    message: str


def applied(decided: Approval | Answer, args: dict[str, Any]) -> Approval | Answer:
    """An approval with its edit applied to the call's `args` as a merge patch (`edits`: the
    one meaning of an edit on every door); anything else (an answer, a denial, an approval
    without an edit or recorded already merged, `Logged`) as it is."""
    if isinstance(decided, Answer | Logged) or decided.args is None:
        return decided
    if not isinstance(decided.args, dict):
        return decided  # (not an object: validating it says why)
    return replace(decided, args=merged(args, decided.args))


def recorded(pending_id: str, verdict: Approval | Answer, at: str) -> ev.PendingDecided:
    """A human's answer as the log records it (edited arguments detached from the caller's)."""
    if isinstance(verdict, Answer):
        return ev.PendingDecided(
            id=pending_id, status="answered", by=verdict.by, decided_at=at, answer=verdict.text
        )
    args = copied(verdict.args) if verdict.args is not None else None
    return ev.PendingDecided(
        id=pending_id,
        status="approved" if verdict.approved else "denied",
        by=verdict.by,
        decided_at=at,
        args=args,
        reason=verdict.reason,
    )


def read(decided: ev.PendingDecided | None) -> Approval | Answer | None:
    """What a recorded decision means to the batch it resumes (None: open, or skipped)."""
    if decided is None or decided.status == "skipped":
        return None
    if decided.status == "answered":
        return Answer(text=decided.answer or "", by=decided.by)
    approved = decided.status == "approved"
    return Approval(approved=approved, args=decided.args, reason=decided.reason, by=decided.by)


def refusal(item: Item | None, decided: ev.PendingDecided, edits: Edits | None) -> Refusal | None:
    """Why `decided` may not be recorded on `item` (None: it may)."""
    if item is None or item.id != decided.id:
        return Refusal("unknown", f"no pending item {decided.id!r}")
    if item.status != "open":
        return Refusal("decided", f"{item.id} is already {item.status}")
    if decided.status != "skipped" and (item.kind == "question") != (decided.status == "answered"):
        kind = "a question: answer it" if item.kind == "question" else "an approval"
        return Refusal("wrong_kind", f"{item.id} is {kind}")
    if decided.status != "approved" or decided.args is None or edits is None:
        return None
    if edits.tool is None or edits.scope is None:
        return Refusal("invalid_edit", f"{item.id}: the tool {edits.name!r} no longer exists")
    try:
        vet_edit(edits.tool, edits.gate, edits.scope, decided.args)
    except ValueError as exc:
        return Refusal("invalid_edit", str(exc))
    return None


def rule(
    items: Sequence[Item], decided: ev.PendingDecided, edits: Edits | None = None
) -> list[ev.PendingDecided] | Refusal:
    """The events recording `decided` on one of `items` (its batch, in request order), or why
    it is refused (see the module docstring)."""
    item = next((i for i in items if i.id == decided.id), None)
    refused = refusal(item, decided, edits)
    if refused is not None:
        return refused
    events = [decided]
    if decided.status == "denied":
        by, at = f"closed by {decided.id}", decided.decided_at
        events += [
            ev.PendingDecided(id=other.id, status="skipped", by=by, decided_at=at)
            for other in items
            if other.status == "open" and other.id != decided.id
        ]
    return events


def closes_under(pending_id: str, status: str) -> str | None:
    """A denial closes the open items of the subagent sessions under its item's session: the
    `by` their skips record, or None when the decision closes nothing there."""
    return f"closed by {pending_id}" if status == "denied" else None


Reported = Literal["resolved", "already_resolved", "invalid"]


def outcome(ruled: list[ev.PendingDecided] | Refusal) -> Reported:
    """How a door reports a ruling: recorded, another decision came first, or refused."""
    if not isinstance(ruled, Refusal):
        return "resolved"
    return "already_resolved" if ruled.why == "decided" else "invalid"
