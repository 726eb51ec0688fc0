"""A server's elicitation request (`elicitation/create`) as a question to the person.

While one of its tools runs, an MCP server may ask the user for input. The question goes to the
run's live approver the way `ask_user` does (a `QuestionRequest`), with the server's message and
the fields it wants; the person's answer (free text: a JSON object, or for a single field its
value alone) is checked against the server's schema, its defaults filled in, and sent back as
`accept`. With nobody to answer live (no approver, or one that defers), or an answer that does
not fit, the server is told `decline`: a tool call cannot pause in the middle and resume in
another process, so an elicitation never becomes a durable pending item. For the same reason,
in a run of the durable runtime, whose approvers answer from its log, only a person its approver
wraps (`loopwright run` at a terminal, an in-process callback) is asked; a run held by an HTTP
stream declines them.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from ..approvals import Answer, QuestionRequest, ask_human, now_iso
from ..messages import ToolCall
from ..tools import ToolContext

log = logging.getLogger("loopwright.tools")


async def ask(server: str, ctx: ToolContext | None, message: str, schema: dict[str, Any]) -> Any:
    """The answer's content for the server (a dict), or None to decline."""
    approver = None if ctx is None else _person(ctx.approver)
    if ctx is None or approver is None:
        return None
    fields: dict[str, Any] = schema.get("properties") or {}
    request = QuestionRequest(
        id="q_" + secrets.token_urlsafe(18),
        call=ToolCall(id=ctx.call_id, name=ctx.tool, args={}),
        question=_question(server, message, fields),
        options=_options(fields),
        agent=ctx.agent,
        session_id=ctx.session_id,
        requested_at=now_iso(),
    )
    try:
        answer = await ask_human(approver, request, lambda _args: None)
    except Exception:  # an approver that cannot take this question (a durable journal's)
        log.warning("MCP server %r: elicitation not answered", server, exc_info=True)
        return None
    if not isinstance(answer, Answer):
        return None
    return content_of(answer.text, schema)


def _person(approver: Any) -> Any:
    """Who answers an elicitation: the run's live approver; of the durable runtime's approvers,
    which answer with the decision the log records for an item (and an elicitation is no item
    of the log), the person a terminal's approver wraps, and none for a held stream's."""
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
    lines = [f"The MCP server '{server}' asks: {message}"]
    for name, field in fields.items():
        field = field if isinstance(field, dict) else {}
        about = field.get("description") or field.get("title") or ""
        kind = field.get("type", "value")
        lines.append(f"- {name} ({kind}){': ' + about if about else ''}")
    if len(fields) > 1:
        lines.append("Answer with a JSON object of these fields.")
    return "\n".join(lines)


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
    return [str(c) for c in choices] if isinstance(choices, list) else None
