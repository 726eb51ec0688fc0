"""Asking the editor about one pending approval, until the single authority takes an answer.

`session/request_permission` offers "Allow once" and "Reject" (and "Edit and allow" where the
client can show a form: `edits`); the answer is recorded through `Runtime.resolve` by the
caller's `resolve`. An edit it refuses is asked again, with why as the tool call's content. A
request the client answers `cancelled` (it cancelled the turn) records nothing. The request's
`_meta.loopwright.pendingId` names the item, so the other doors (`loopwright approvals`, the
HTTP API) can decide it too: the first decision wins wherever it is made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp import text_block, tool_content
from acp.interfaces import Client
from acp.schema import AcceptElicitationResponse, AllowedOutcome, PermissionOption, ToolCallUpdate

from ..approvals import Approval
from ..runtime import Resolved
from . import edits
from .updates import kind_of

ALLOW, REJECT = "allow_once", "reject_once"
OPTIONS = [
    PermissionOption(option_id=ALLOW, name="Allow once", kind="allow_once"),
    PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
]
WITH_EDIT = [
    OPTIONS[0],
    PermissionOption(option_id=edits.EDIT, name="Edit and allow", kind="allow_once"),
    OPTIONS[1],
]

Resolve = Callable[[Approval], Awaitable[Resolved]]


class Asker:
    """Asks `conn`'s user; decisions are recorded as made `by` them."""

    def __init__(self, conn: Client, by: str, *, can_edit: bool) -> None:
        self.conn = conn
        self.by = by
        self.options = WITH_EDIT if can_edit else OPTIONS

    async def decide(
        self,
        session_id: str,
        pending_id: str,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        resolve: Resolve,
        *,
        label: str | None = None,
    ) -> Resolved | None:
        """The item as resolved by the editor's answer (None: the client cancelled); the call's
        title is the tool's `label` when it has one."""
        note: str | None = None
        while True:
            decision = await self._ask(session_id, pending_id, call_id, tool, args, note, label)
            if decision is None:
                return None
            resolved = await resolve(decision)
            if resolved.status != "invalid":
                return resolved
            note = f"The edit was refused: {resolved.error}"

    async def _ask(
        self,
        session_id: str,
        pending_id: str,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        note: str | None,
        label: str | None,
    ) -> Approval | None:
        while True:
            content: list[Any] | None = [tool_content(text_block(note))] if note else None
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(
                    tool_call_id=call_id,
                    title=label or tool,
                    kind=kind_of(tool),
                    status="pending",
                    raw_input=args,
                    content=content,
                ),
                options=self.options,
                loopwright={"pendingId": pending_id},
            )
            if not isinstance(answer.outcome, AllowedOutcome):
                return None
            chosen = answer.outcome.option_id
            if chosen == ALLOW:
                return Approval.approve(by=self.by)
            if chosen != edits.EDIT:
                return Approval.deny(by=self.by)
            reply = await self.conn.create_elicitation(
                message=f"Edit the arguments of {label or tool}, then allow it",
                mode=edits.form(session_id, call_id, args),
            )
            if isinstance(reply, AcceptElicitationResponse):
                return Approval.approve(edits.edited(args, reply.content), by=self.by)
            note = "The edit was dismissed."  # declined or cancelled: asked again
