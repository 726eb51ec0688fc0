"""A session's state kept as one JSON text (`to_snapshot` / `from_snapshot`): folding the events
after a snapshot into the state it restores gives what folding the whole log gives (`replay`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import redact
from ..messages import AssistantMessage, Message, ToolResultMessage
from ..tools import Tool
from ..wire import loads, messages_from_json, messages_to_json, to_dict
from .history import History
from .session_state import OpenBatch, SessionState

_HEAD = '{"version":1,"state":'
_MESSAGES = ',"messages":'


def to_snapshot(state: SessionState) -> str:
    """The state as one JSON object: `{"version": 1, "state": {...}, "messages": [...]}`.

    `messages` (wire form) holds the history's messages, then — while a batch is open — one
    assistant message holding its calls and the results it has so far; `state` holds the rest.
    The derived checkpoint and recovery are not kept (they are derived on each read)."""
    history, batch = state.history, state.batch
    messages: list[Message] = list(history.messages)
    head: dict[str, Any] = {
        "history": len(messages),
        "carryOver": state.carry_over,
        "chars": history.chars,
        "reportedTokens": history.reported_tokens,
        "charsAtReport": history.chars_at_report,
        "compactedAt": history.compacted_at,
        "queued": [list(entry) for entry in state.queued],
        "paused": state.paused,
        "finished": state.finished,
        "batch": None,
    }
    if batch is not None:
        messages.append(AssistantMessage(parts=tuple(batch.calls)))
        messages += batch.results.values()
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
    return f"{_HEAD}{body}{_MESSAGES}{messages_to_json(messages)}}}"


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
    messages = messages_from_json(data[end + len(_MESSAGES) : -1])
    count = head["history"]
    history = History(
        messages=messages[:count],
        chars=head["chars"],
        reported_tokens=head["reportedTokens"],
        chars_at_report=head["charsAtReport"],
        compacted_at=head["compactedAt"],
    )
    state = SessionState(
        tools=tools,
        history=history,
        paused=head["paused"],
        finished=head["finished"],
        carry_over=head["carryOver"],
        queued=[(mode, text) for mode, text in head["queued"]],
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
