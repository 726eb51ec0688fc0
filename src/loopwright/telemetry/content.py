"""What of a run's content goes into its spans: when opted in (`capture_content`), messages in
the GenAI conventions' shape and JSON with its secrets redacted; with it off, only what of a
run's text is not content (an error's kind, the gate's own reasons: docs/telemetry.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from .. import redact
from ..messages import CustomMessage, Message, Text, ToolCall, ToolResultMessage, UserMessage


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def message_of(message: Message) -> dict[str, Any]:
    """A history message in the conventions' shape (role and parts)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "parts": [text_part(message.content)]}
    if isinstance(message, ToolResultMessage):
        part = {"type": "tool_call_response", "id": message.call_id, "response": message.content}
        return {"role": "tool", "parts": [part]}
    if isinstance(message, CustomMessage):
        return {"role": "custom", "parts": [text_part(message.content)]}
    parts: list[dict[str, Any]] = []
    for p in message.parts:
        if isinstance(p, Text):
            parts.append(text_part(p.text))
        elif isinstance(p, ToolCall):
            parts.append({"type": "tool_call", "id": p.id, "name": p.name, "arguments": p.args})
        else:
            parts.append({"type": "reasoning", "content": p.text})
    return {"role": "assistant", "parts": parts}


def dumps(value: Any) -> str:
    """Captured content as JSON, its secrets redacted (P11: opting in to content is not
    opting in to keys)."""
    return redact.json_text(json.dumps(value, ensure_ascii=False, default=str))


# ---- what is not content: kept with capture off --------------------------------------------

_KIND = re.compile(r"Tool '[^'\n]*' failed: ([A-Za-z_]\w{0,99})(?::|$)")
"""The class of the exception a call raised, as `loop/calls.py` words its error result."""

_REASONS = (  # the gate's own reasons (`gate/`): names from configuration, no values
    r"matched rule '[^'\n]{1,200}'",
    r"arguments could not be evaluated for rule '[^'\n]{1,200}'",
    r"no rule matched: default decision '(?:allow|ask|deny)'",
    r"no rules: allowed",
    r"built-in: not gated",
    r"re-run after an interruption: the tool is idempotent",
    r"resumed: the subagent's pending items were resolved",
    r"resumed: its question was answered",
    r"not resumed: a sibling call was denied",
    r"not resumed: its arguments held a secret the log does not keep",
)
_OUTCOMES = r"human approved, but|human approved|human denied|run ended before a decision"
_REASON = re.compile(rf"(?:{'|'.join(_REASONS)})(?: — (?:{_OUTCOMES})(?=$|\W))?")


def error_kind(error: str | None) -> str:
    """A failed call's kind: the class of the exception it raised, else `tool_error` (a
    `ToolError`, a refused or invalid call: its text is content)."""
    found = _KIND.match(error or "")
    return found.group(1) if found else "tool_error"


def gate_reason(reason: str) -> str | None:
    """What of the gate's reason is not content: the part loopwright's rules wrote (a rule's
    name, the default, the human's verdict), `[…]` marking what was left out (a human's
    reason, an argument's value, an exception's message); None when none of it is (a custom
    gate's reason)."""
    found = _REASON.match(reason)
    if found is None:
        return None
    return reason if found.end() == len(reason) else f"{found.group(0)} […]"
