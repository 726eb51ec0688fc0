"""The event vocabulary: names, the committed schema, the v1 projection (its schema:
test_protocol_v1.py)."""

from __future__ import annotations

import json
import typing

from conftest import ROOT, V1
from loopwright import events as ev
from loopwright.messages import AssistantMessage, Text, ToolCall, Usage
from loopwright.wire import dumps, event_schema, loads, to_dict

EVENT_CLASSES = typing.get_args(ev.Event)


def test_class_names_are_the_camel_case_of_their_type():
    for cls in EVENT_CLASSES:
        wire_type = cls.__dataclass_fields__["type"].default
        expected = "".join(w.capitalize() for w in wire_type.replace(":", "_").split("_"))
        assert cls.__name__ == expected, wire_type


def test_committed_schema_is_current():
    committed = json.loads((ROOT / "protocol" / "loop-event.schema.json").read_text())
    assert committed == event_schema(), (
        "run: python -m loopwright.wire > protocol/loop-event.schema.json"
    )


def test_wire_names_are_camel_case_and_unset_optionals_are_absent():
    event = ev.ToolResult(id="c1", tool="t", status_text="Approved.")
    assert to_dict(event) == {
        "id": "c1",
        "tool": "t",
        "statusText": "Approved.",
        "type": "tool:result",
    }
    assert json.loads(dumps(ev.PromptCompaction(from_=9, to=3))) == {
        "from": 9,
        "to": 3,
        "type": "prompt:compaction",
    }


def test_events_round_trip_through_json():
    message = AssistantMessage(
        parts=(Text(text="hi"), ToolCall(id="1", name="t", args={"a": [1]})),
        stop_reason="tool_use",
        usage=Usage(input_tokens=3, cost=0.5),
    )
    samples = [
        ev.MessageCompleted(message=message),
        ev.SubagentEvent(
            origin=ev.Origin(agent="child", session_id="s2", call_id="c"),
            event=ev.TextDelta(delta="x"),
        ),
        ev.BudgetCheck(
            action="nudge",
            used_tokens=1,
            budget_tokens=2,
            ratio=0.5,
            nudge=ev.Nudge(role="system", content="wrap up"),
        ),
    ]
    for event in samples:
        assert loads(dumps(event)) == event


def test_v1_projection():
    assert to_dict(ev.TextDelta(delta="x"), "v1") is None
    assert to_dict(ev.LoopError(error="boom"), "v1") == {"type": "error", "error": "boom"}
    assert to_dict(ev.Done(text="t", stop_reason="paused"), "v1") == {"type": "done", "text": "t"}
    assert to_dict(ev.Done(text="t", stop_reason="denied"), "v1") == {
        "type": "done",
        "text": "t",
        "stopReason": "denied",
    }
    for stop in typing.get_args(ev.RunStopReason):
        V1.validate(to_dict(ev.Done(text="", stop_reason=stop), "v1"))


def test_loads_rejects_unknown_types_and_fields():
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError):
        loads('{"type": "tool:teleported"}')
    with pytest.raises(pydantic.ValidationError):
        loads('{"type": "session", "sessionId": "s", "extra": 1}')
