"""A session's state kept as one JSON text (`to_snapshot` / `from_snapshot`): folding the events
after a snapshot into the state it restores gives what folding the whole log gives (`replay`).

A long session's snapshot costs what it adds, not its length: each message is serialised and
redacted once — its JSON is kept with the history (`History.encoded`) as a snapshot writes it or
reads it back, and the next snapshot writes the text kept for the messages it still has plus
the new ones' — and read back by `stored.decode` (its fast path makes the message values
directly from the parsed JSON, without pydantic's validation per message).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from operator import is_
from typing import Any

from .. import redact
from ..messages import AssistantMessage, Message, ToolResultMessage
from ..tools import Tool
from ..wire import loads, messages_to_json, to_dict
from .history import EncodedMessages, History
from .session_state import OpenBatch, SessionState
from .stored import decode

_HEAD = '{"version":1,"state":'
_MESSAGES = ',"messages":'


def to_snapshot(state: SessionState) -> str:
    """The state as one JSON object: `{"version": 1, "state": {...}, "messages": [...]}`.

    `messages` (wire form) holds the history's messages, then — while a batch is open — one
    assistant message holding its calls and the results it has so far; `state` holds the rest.
    The derived checkpoint and recovery are not kept (they are derived on each read)."""
    history, batch = state.history, state.batch
    head: dict[str, Any] = {
        "history": len(history.messages),
        "carryOver": state.carry_over,
        "chars": history.chars,
        "reportedTokens": history.reported_tokens,
        "charsAtReport": history.chars_at_report,
        "compactedAt": history.compacted_at,
        "queued": [list(entry) for entry in state.queued],
        "paused": state.paused,
        "finished": state.finished,
        "replies": state.replies,
        "agent": state.agent,
        "handoffCall": state.handoff_call,
        "batch": None,
    }
    text = encoded(history).text
    if batch is not None:
        tail: list[Message] = [AssistantMessage(parts=tuple(batch.calls))]
        tail += batch.results.values()
        text = _joined(text, messages_to_json(tail)[1:-1])
        head["batch"] = {
            "started": sorted(batch.started),
            "args": batch.args,
            "asked": [to_dict(e) for e in batch.asked.values()],
            "askedCall": batch.asked_call,
            "decided": [to_dict(e) for e in batch.decided.values()],
            "suspended": [to_dict(e) for e in batch.suspended.values()],
            "answers": batch.answers,
        }
    body = redact.json_text(json.dumps(head, ensure_ascii=False, separators=(",", ":")))  # (P11)
    return f"{_HEAD}{body}{_MESSAGES}[{text}]}}"


def encoded(history: History) -> EncodedMessages:
    """The history's messages as JSON (redacted), kept with it (`History.encoded`): only those
    its last encoding did not hold are serialised (all of them after a compaction)."""
    messages, kept = history.messages, history.encoded
    text, done = "", 0
    if (
        kept is not None
        and len(kept.messages) <= len(messages)
        and all(map(is_, kept.messages, messages))
    ):
        text, done = kept.text, len(kept.messages)
        if done == len(messages):
            return kept
    fresh = EncodedMessages(messages[:], _joined(text, messages_to_json(messages[done:])[1:-1]))
    history.encoded = fresh
    return fresh


def _joined(text: str, more: str) -> str:
    return f"{text},{more}" if text and more else text or more


def from_snapshot(data: str, tools: Mapping[str, Tool]) -> SessionState:
    """The state `to_snapshot` wrote, with `tools` (looked up by name when a paused batch's
    checkpoint is derived). `ValueError` for anything else, such as another version."""
    try:
        return _restore(data, tools)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a version 1 session snapshot ({exc!r})") from None


def _restore(data: str, tools: Mapping[str, Tool]) -> SessionState:
    if not (data.startswith(_HEAD) and data.endswith("}")):
        raise ValueError("not a version 1 session snapshot")
    head, end = json.JSONDecoder().raw_decode(data, len(_HEAD))
    if not data.startswith(_MESSAGES, end):
        raise ValueError("not a version 1 session snapshot")
    array = data[end + len(_MESSAGES) : -1]
    messages = decode(array)
    count = head["history"]
    history = History(
        messages=messages[:count],
        chars=head["chars"],
        reported_tokens=head["reportedTokens"],
        chars_at_report=head["charsAtReport"],
        compacted_at=head["compactedAt"],
    )
    if count == len(messages) and array.startswith("[") and array.endswith("]"):
        history.encoded = EncodedMessages(history.messages[:], array[1:-1])  # (as it was written)
    state = SessionState(
        tools=tools,
        history=history,
        paused=head["paused"],
        finished=head["finished"],
        carry_over=head["carryOver"],
        queued=[(mode, text) for mode, text in head["queued"]],
        replies=head["replies"],  # (a snapshot older than it is ignored: the log is folded)
        agent=head.get("agent"),  # (absent from a snapshot older than handoffs: the first)
        handoff_call=head.get("handoffCall"),
    )
    saved = head["batch"]
    if saved is not None:
        reply = messages[count]
        if not isinstance(reply, AssistantMessage):
            raise ValueError("not a version 1 session snapshot (no open batch's calls)")
        results = [m for m in messages[count + 1 :] if isinstance(m, ToolResultMessage)]
        state.batch = OpenBatch(
            calls=reply.tool_calls,
            results={m.call_id: m for m in results},
            started=set(saved["started"]),
            args=saved["args"],
            asked={e.id: e for e in _events(saved["asked"])},
            asked_call=saved["askedCall"],
            decided={e.id: e for e in _events(saved["decided"])},
            suspended={e.id: e for e in _events(saved["suspended"])},
            answers=saved.get("answers", {}),  # (a snapshot written before answers were kept)
        )
    return state


def _events(items: list[dict[str, Any]]) -> list[Any]:
    return [loads(item) for item in items]
