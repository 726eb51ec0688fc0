"""A stored session's model replies as a scripted model: what replay and evals stand in for
the model with, offline and deterministic.

    stored = await log.read(key)                 # or `store.export.read_jsonl(lines)`
    model = recorded_model(e.event for e in stored)
    script = recorded_script(e.event for e in stored)   # the same, as script data (YAML-able)

Every `message:completed` of the log becomes one reply, in order, with its text, thinking,
tool calls (their ids kept), usage and stop reason; a `compaction:finished` with a summary
becomes the reply its summary request got, where it stood. Failed model requests left no
reply in the log and so take none here. A subagent's replies are in its own session's log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..events import CompactionFinished, Event, MessageCompleted
from ..messages import AssistantMessage, Text, Thinking, ToolCall, Usage
from .scripted import ScriptedModel


def recorded_script(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The replies a session's events record, as scripted-model script entries."""
    script: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, MessageCompleted):
            script.append(_entry(event.message))
        elif isinstance(event, CompactionFinished) and event.summary is not None:
            script.append({"text": event.summary})
    return script


def recorded_model(events: Iterable[Event], *, name: str = "recorded") -> ScriptedModel:
    """A scripted model that answers with the replies `events` record, in order."""
    return ScriptedModel.from_script(recorded_script(events), name=f"scripted:{name}")


def _entry(message: AssistantMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    text = "".join(p.text for p in message.parts if isinstance(p, Text))
    thinking = "".join(p.text for p in message.parts if isinstance(p, Thinking))
    calls = [p for p in message.parts if isinstance(p, ToolCall)]
    if thinking:
        entry["thinking"] = thinking
    if text:
        entry["text"] = text
    if calls:
        entry["tool_calls"] = [{"name": c.name, "args": c.args, "id": c.id} for c in calls]
    if message.usage is not None:
        entry["usage"] = _usage(message.usage)
    entry["stop_reason"] = message.stop_reason
    return entry


def _usage(usage: Usage) -> dict[str, Any]:
    fields = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    out: dict[str, Any] = {name: getattr(usage, name) for name in fields}
    if usage.cost is not None:
        out["cost"] = usage.cost
    return out
