"""A server's elicitation request (`elicitation/create`) as a question to the person.

While one of its tools runs, an MCP server may ask the user for input. The question (the
server's message and the fields it wants, `_question`) is answered, in this order:

1. from the call's earlier answers (`ToolContext.answers`, keyed by the question's text, which
   is the same for the same message and form);
2. by the run's live person, the way `ask_user` asks them (a `QuestionRequest`): an in-process
   approver, or the person the durable runtime's approver wraps (`loopwright run` at a
   terminal);
3. with nobody to answer live (a run held by an HTTP stream, no approver, or one that defers,
   as for `ask_user`), the call pauses on it: the tool returns `NeedsAnswer` and the run pauses
   on a question item like `ask_user`'s (the server is told `cancel` once its call has been
   cancelled). Once it is answered the call runs again from the start, and the answer comes
   from 1: a server that acted before it asked acts again.

The answer (free text: a JSON object, or for a single field its value alone) is checked against
the server's schema, its defaults filled in, and sent back as `accept`; an answer that does not
fit is sent as `decline`, and so is a URL-mode elicitation (nothing a question can carry).
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from ..approvals import Answer, QuestionRequest, ask_human, now_iso
from ..loop.progress import cut
from ..messages import ToolCall
from ..tools import NeedsAnswer, ToolContext

log = logging.getLogger("loopwright.tools")

MAX_QUESTION = 4_000
"""Characters of a question kept (the server's message and its form; a longer one is cut)."""
MAX_OPTIONS = 50
"""Suggested answers kept of a field's choices (any answer that fits the form is accepted)."""


async def answer(
    server: str, ctx: ToolContext | None, message: str, schema: dict[str, Any]
) -> dict[str, Any] | NeedsAnswer | None:
    """The content to accept, `NeedsAnswer` when the call must pause on the question, or None
    to decline (see the module)."""
    fields: dict[str, Any] = schema.get("properties") or {}
    question = _question(server, message, fields)
    if ctx is not None and question in ctx.answers:
        content = content_of(ctx.answers[question], schema)
        if content is None:
            log.warning("MCP server %r: the answer does not fit its form; declined", server)
        return content
    approver = None if ctx is None else _person(ctx.approver)
    if ctx is None or approver is None:
        return NeedsAnswer(question, _options(fields))
    request = QuestionRequest(
        id="q_" + secrets.token_urlsafe(18),
        call=ToolCall(id=ctx.call_id, name=ctx.tool, args={}),
        question=question,
        options=_options(fields),
        agent=ctx.agent,
        session_id=ctx.session_id,
        requested_at=now_iso(),
    )
    try:
        reply = await ask_human(approver, request, lambda _args, _logged: None)
    except Exception:
        log.warning("MCP server %r: elicitation not answered", server, exc_info=True)
        return None
    if not isinstance(reply, Answer):  # the person defers, as to `ask_user`: the run pauses
        return NeedsAnswer(question, _options(fields))
    return content_of(reply.text, schema)


def _person(approver: Any) -> Any:
    """Who answers an elicitation live: the run's live approver; of the durable runtime's
    approvers, which answer with the decision the log records for an item (an elicitation is
    no item of the log until its call pauses on it), the person a terminal's approver wraps,
    and none for a held stream's."""
    while getattr(approver, "from_log", False):  # (a held stream's may be wrapped in turn)
        approver = getattr(approver, "person", None)
    return approver


def content_of(text: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The person's answer as the form's content (defaults filled in), None when it does not
    fit the schema."""
    import jsonschema  # type: ignore[import-untyped]

    fields: dict[str, Any] = schema.get("properties") or {}
    value: Any
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        value = text
    if not isinstance(value, dict):
        if len(fields) != 1:
            return None
        name, field = next(iter(fields.items()))
        is_text = isinstance(field, dict) and field.get("type") == "string"
        value = {name: text.strip() if is_text else value}
    content = {
        name: field["default"]
        for name, field in fields.items()
        if isinstance(field, dict) and "default" in field
    }
    content.update(value)
    try:
        jsonschema.validate(content, schema)
    except (jsonschema.ValidationError, jsonschema.SchemaError):
        return None
    return content


def _question(server: str, message: str, fields: dict[str, Any]) -> str:
    """The question's text: the same for the same message and form (it keys the answer when
    the call runs again), cut at `MAX_QUESTION` characters."""
    lines = [f"The MCP server '{server}' asks: {message}"]
    for name, field in fields.items():
        field = field if isinstance(field, dict) else {}
        about = field.get("description") or field.get("title") or ""
        kind = field.get("type", "value")
        lines.append(f"- {name} ({kind}){': ' + about if about else ''}")
    if len(fields) > 1:
        lines.append("Answer with a JSON object of these fields.")
    return cut("\n".join(lines), MAX_QUESTION)


def _options(fields: dict[str, Any]) -> list[str] | None:
    """A single field's choices (an enum or a boolean), as suggested answers."""
    if len(fields) != 1:
        return None
    field = next(iter(fields.values()))
    if not isinstance(field, dict):
        return None
    if field.get("type") == "boolean":
        return ["true", "false"]
    choices = field.get("enum")
    return [str(c) for c in choices[:MAX_OPTIONS]] if isinstance(choices, list) else None
