"""A history read back from a snapshot (`decode`): the messages a snapshot wrote, as values.

A snapshot's messages are the wire JSON this process's own `wire.messages_to_json` wrote, so
the fast path trusts their shape: one parse of the whole array (pydantic-core's), then each
message made from its object with the values' makers (`_values.maker`), without validating
each one again (about 20 k instructions a message against pydantic's 31 k). Any object it does
not know key for key — an attachment, a field added since, a part of another type — is handed
to pydantic's validation instead (`wire.messages_from_json`), so what comes back is what
pydantic would make, only cheaper.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import from_json

from ..messages import (
    AssistantMessage,
    Message,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..wire import messages_from_json
from ._values import maker

_user, _assistant, _result = maker(UserMessage), maker(AssistantMessage), maker(ToolResultMessage)
_text, _thinking, _call, _usage = maker(Text), maker(Thinking), maker(ToolCall), maker(Usage)

USER = frozenset({"content", "role"})
ASSISTANT = frozenset({"parts", "stopReason", "usage", "model", "role"})
RESULT = frozenset({"callId", "tool", "content", "isError", "role"})
TEXT = frozenset({"text", "type"})
THINKING = frozenset({"text", "signature", "type"})
CALL = frozenset({"id", "name", "args", "type"})
USAGE = frozenset({"inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "cost"})
"""The wire keys the fast path makes each value from (tests/test_snapshots_stored.py checks
them against the values' fields): an object with any other key is pydantic's to read (told
by its number of keys: each key read is there, or the read fails)."""


class _NotOurs(Exception):
    pass


def decode(array: str) -> list[Message]:
    """The messages of a JSON array a snapshot wrote (`ValueError` when it is not one)."""
    items = from_json(array)
    if not isinstance(items, list):
        raise ValueError("not a JSON array of messages")
    out: list[Message] = []
    for item in items:
        try:
            out.append(_message(item))
        except (_NotOurs, KeyError, TypeError, AttributeError):
            out += messages_from_json(json.dumps([item]))  # (whatever it is: pydantic says)
    return out


def _message(m: dict[str, Any]) -> Message:
    """The message of `m` (`_NotOurs` when `m` holds a key beside those it reads: the number
    of keys says so, each it reads being there)."""
    role = m["role"]
    if role == "assistant":
        usage, model = m.get("usage"), m.get("model")
        if len(m) != 3 + (usage is not None) + (model is not None):
            raise _NotOurs
        return _assistant(
            parts=tuple(map(_part, m["parts"])),
            stop_reason=m["stopReason"],
            usage=None if usage is None else _usage_of(usage),
            model=model,
        )
    if role == "user" and len(m) == 2:
        return _user(content=m["content"])
    if role == "tool" and len(m) == 5:
        return _result(
            call_id=m["callId"], tool=m["tool"], content=m["content"], is_error=m["isError"]
        )
    raise _NotOurs


def _part(p: dict[str, Any]) -> Text | Thinking | ToolCall:
    kind = p["type"]
    if kind == "text" and len(p) == 2:
        return _text(text=p["text"])
    if kind == "tool_call" and len(p) == 4:
        return _call(id=p["id"], name=p["name"], args=p["args"])
    if kind == "thinking":
        signature = p.get("signature")
        if len(p) == 2 + (signature is not None):
            return _thinking(text=p["text"], signature=signature)
    raise _NotOurs


def _usage_of(u: dict[str, Any]) -> Usage:
    cost = u.get("cost")
    if len(u) != 4 + (cost is not None):
        raise _NotOurs
    return _usage(
        input_tokens=u["inputTokens"],
        output_tokens=u["outputTokens"],
        cache_read_tokens=u["cacheReadTokens"],
        cache_write_tokens=u["cacheWriteTokens"],
        cost=cost,
    )
