"""What of a run's content goes into its spans, when opted in (`capture_content`): messages in
the GenAI conventions' shape, and JSON with its secrets redacted."""

from __future__ import annotations

import json
from typing import Any

from .. import redact
from ..messages import Message, Text, ToolCall, ToolResultMessage, UserMessage


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def message_of(message: Message) -> dict[str, Any]:
    """A history message in the conventions' shape (role and parts)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "parts": [text_part(message.content)]}
    if isinstance(message, ToolResultMessage):
        part = {"type": "tool_call_response", "id": message.call_id, "response": message.content}
        return {"role": "tool", "parts": [part]}
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
