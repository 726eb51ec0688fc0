"""A history in loopengine v1's shape (`GET /agents/{name}/sessions/{id}` under the v1 profile):
Anthropic-style messages `{role, content: string | Block[]}` — a user's text as a string, an
assistant's reply as `text` / `thinking` / `tool_use` blocks, and the results of one batch of
calls as one user message of `tool_result` blocks."""

from __future__ import annotations

import json
from typing import Any

from ..messages import Message
from ..wire import messages_to_json


def v1_history(messages: list[Message]) -> list[dict[str, Any]]:
    """The v1 messages of `messages` (redacted, as `messages_to_json` is)."""
    out: list[dict[str, Any]] = []
    for message in json.loads(messages_to_json(messages)):
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            out.append({"role": "assistant", "content": [_block(p) for p in message["parts"]]})
        else:
            result = {
                "type": "tool_result",
                "tool_use_id": message["callId"],
                "content": message["content"],
                "is_error": bool(message.get("isError", False)),
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(result)  # (one batch's results: one message)
            else:
                out.append({"role": "user", "content": [result]})
    return out


def _block(part: dict[str, Any]) -> dict[str, Any]:
    kind = part["type"]
    if kind == "tool_call":
        return {"type": "tool_use", "id": part["id"], "name": part["name"], "input": part["args"]}
    if kind == "thinking":
        return {"type": "thinking", "text": part["text"]}
    return {"type": "text", "text": part["text"]}
