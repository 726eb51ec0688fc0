"""Editing a tool call's arguments from the editor, where the client can.

ACP's `session/request_permission` answers with one of the options offered and nothing else: no
edited arguments. A client that advertises form elicitation (`clientCapabilities.elicitation.
form`, still unstable in ACP) is offered a third option, "Edit and allow": choosing it opens a
form (`elicitation/create`, scoped to the session and the tool call) with one field per
argument, its current value filled in. A form holds only flat, primitive fields, so a list or
an object argument is a text field holding its JSON. The edit is vetted by `Runtime.resolve`
like an edit from any other door; one it refuses is asked again, saying why.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from acp.schema import (
    ElicitationBooleanPropertySchema,
    ElicitationFormSessionMode,
    ElicitationIntegerPropertySchema,
    ElicitationNumberPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
)

EDIT = "edit"
JSON_NOTE = "JSON"
"""The description of a field holding a non-primitive argument as JSON text."""


def can_edit(client_capabilities: Any) -> bool:
    """Whether the client said it can show a form."""
    elicitation = getattr(client_capabilities, "elicitation", None)
    return elicitation is not None and getattr(elicitation, "form", None) is not None


def form(session_id: str, call_id: str, args: dict[str, Any]) -> ElicitationFormSessionMode:
    """The form of a call's arguments, each field holding the current value."""
    fields: dict[str, Any] = {}
    for name, value in args.items():
        if isinstance(value, bool):
            fields[name] = ElicitationBooleanPropertySchema(type="boolean", default=value)
        elif isinstance(value, int):
            fields[name] = ElicitationIntegerPropertySchema(type="integer", default=value)
        elif isinstance(value, float):
            fields[name] = ElicitationNumberPropertySchema(type="number", default=value)
        elif isinstance(value, str):
            fields[name] = ElicitationStringPropertySchema(type="string", default=value)
        else:
            text = json.dumps(value, ensure_ascii=False)
            fields[name] = ElicitationStringPropertySchema(
                type="string", default=text, description=JSON_NOTE
            )
    schema = ElicitationSchema(type="object", properties=fields, required=list(fields))
    return ElicitationFormSessionMode(
        session_id=session_id, tool_call_id=call_id, requested_schema=schema
    )


def edited(args: dict[str, Any], content: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments as the form returned them: a JSON field parsed back (left as text when it
    is not JSON); a field left out is unchanged."""
    out = dict(args)
    for name, value in (content or {}).items():
        original = args.get(name)
        if isinstance(value, str) and not isinstance(original, str | None):
            with contextlib.suppress(ValueError, RecursionError):  # not JSON: the schema says why
                value = json.loads(value)
        out[name] = value
    return out
