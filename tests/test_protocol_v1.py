"""The loopengine v1 profile's schema, `protocol/loopengine-v1.schema.json`: generated from the v1
classes and committed, the v1 contract to the field, as strict as a v1 client, and — when
`LOOPENGINE_V1_SCHEMA` names a copy of loopengine's own schema — the same as that one."""

from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import ValidationError

from conftest import (
    ROOT,
    V1,
    V1_SCHEMA,
    EventValidator,
    call,
    drive,
    run_agent,
    scripted,
)
from loopwright import Agent, Rules, Session, ToolContext, tool
from loopwright import events as ev
from loopwright.approvals import approve_all
from loopwright.state.compaction import Compaction
from loopwright.tools import ask_user
from loopwright.wire import to_dict, v1_event_schema

# The v1 vocabulary, written out: wire type -> (required fields, optional fields), `type` aside.
V1_CONTRACT: dict[str, tuple[set[str], set[str]]] = {
    "budget:check": ({"action", "usedTokens", "budgetTokens", "ratio"}, {"nudge"}),
    "prompt:compaction": ({"from", "to"}, set()),
    "assistant:text": ({"text"}, set()),
    "actauth:decision": ({"tool", "decision", "reason"}, set()),
    "tool:started": ({"id", "tool", "args", "detailText"}, set()),
    "tool:result": ({"id", "tool", "statusText"}, {"args", "detailText"}),
    "toollane:result": ({"name", "summary"}, set()),
    "skill:loaded": ({"skill"}, set()),
    "loop:skipped": ({"name", "deniedTools"}, set()),
    "loop:max_turns": ({"maxTurns"}, set()),
    "loop:denied": ({"deniedTools"}, set()),
    "loop:done": ({"text"}, set()),
    "session": ({"sessionId"}, set()),
    "approval:pending": ({"id", "tool", "args", "scope", "reason", "requestedAt"}, set()),
    "question:pending": ({"id", "question", "agent", "requestedAt"}, {"options", "sessionId"}),
    "done": ({"text"}, {"stopReason"}),
    "error": ({"error"}, set()),
}


def event_definitions(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """wire type -> the definition of that event, for every event the schema's `oneOf` names."""
    found = {}
    for option in schema["oneOf"]:
        definition = resolve(schema, option)
        found[definition["properties"]["type"]["const"]] = definition
    return found


def resolve(root: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    assert ref.startswith("#/$defs/"), ref
    return root["$defs"][ref.removeprefix("#/$defs/")]  # type: ignore[no-any-return]


def shape(root: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """What a schema accepts, leaving out descriptions, titles and the `type` beside a const or
    an enum; nested objects by their property names, shapes and required fields."""
    schema = resolve(root, schema)
    out: dict[str, Any] = {}
    if "const" in schema:
        out["const"] = schema["const"]
    elif "enum" in schema:
        out["enum"] = sorted(schema["enum"])
    elif "type" in schema:
        out["type"] = schema["type"]
    if "format" in schema:
        out["format"] = schema["format"]
    if "items" in schema:
        out["items"] = shape(root, schema["items"])
    if "properties" in schema:
        out["properties"] = {k: shape(root, v) for k, v in schema["properties"].items()}
        out["required"] = sorted(schema.get("required", []))
    return out


def test_committed_v1_schema_is_current():
    committed = json.loads((ROOT / "protocol" / "loopengine-v1.schema.json").read_text())
    assert committed == v1_event_schema(), (
        "run: python -m loopwright.wire --profile v1 > protocol/loopengine-v1.schema.json"
    )


def test_the_v1_schema_has_exactly_the_v1_types_and_fields():
    definitions = event_definitions(V1_SCHEMA)
    assert set(definitions) == set(V1_CONTRACT) == ev.V1_TYPES
    for wire_type, (required, optional) in V1_CONTRACT.items():
        definition = definitions[wire_type]
        assert set(definition["required"]) == required | {"type"}, wire_type
        assert set(definition["properties"]) == required | optional | {"type"}, wire_type
        assert definition["additionalProperties"] is False, wire_type


def test_the_v1_schema_is_as_strict_as_a_v1_client():
    def accepts(instance: dict[str, Any]) -> bool:
        try:
            V1.validator.validate(instance)  # the whole schema, its `oneOf` included
        except ValidationError:
            return False
        return True

    assert accepts({"type": "done", "text": "t"})
    assert accepts({"type": "done", "text": "t", "stopReason": "denied"})
    assert not accepts({"type": "done", "text": "t", "stopReason": "completed"})  # not in v1
    assert not accepts({"type": "done"})
    assert not accepts({"type": "text:delta", "delta": "x"})  # additive types never reach v1
    assert not accepts({"type": "loop:error", "error": "boom"})  # v1 calls it `error`
    assert not accepts({"type": "session", "sessionId": "s", "agent": "a"})  # no new fields
    assert not accepts({"type": "loop:max_turns", "maxTurns": "3"})
    # v1 numbers are JavaScript numbers
    assert accepts({"type": "loop:max_turns", "maxTurns": 2.5})


def strategy_for(name: str, hint: Any) -> st.SearchStrategy[Any]:
    if name == "requested_at":
        return st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat())
    if isinstance(hint, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        [inner] = options
        return st.none() | strategy_for(name, inner)
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint == dict[str, Any]:
        scalars = st.none() | st.booleans() | st.integers() | st.text()
        return st.dictionaries(st.text(), st.recursive(scalars, st.lists, max_leaves=5))
    return st.from_type(hint)


def built(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls) if f.name != "type"]
    return st.builds(cls, **{name: strategy_for(name, hints[name]) for name in fields})


V1_CLASSES = [*typing.get_args(ev.V1Event), ev.LoopError]


@settings(max_examples=100, deadline=None)
@given(st.one_of(*[built(cls) for cls in V1_CLASSES]))
def test_every_v1_event_we_can_make_validates(event):
    projected = to_dict(event, "v1")
    assert projected is not None
    V1.validate(projected)


# ---- the one comparison with loopengine's own schema ----------------------------------------

RULES = Rules.from_yaml("""
default_decision: deny
rules:
  - {name: free, tool: lookup, decision: allow}
  - {name: asked, tool: refund, decision: ask}
  - {name: questions, tool: ask_user, decision: allow}
  - {name: skills, tool: load_skill, decision: allow}
""")


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount:g}"


@tool
def wipe() -> str:
    """Never allowed."""
    return "wiped"


@tool
async def load_skill(ctx: ToolContext) -> str:
    """Loads a skill."""
    ctx.emit(ev.SkillLoaded(skill="deploy"))
    return "loaded"


def agent(model: Any, **kw: Any) -> Agent:
    tools = [lookup, refund, wipe, ask_user, load_skill]
    return Agent(model=model, tools=tools, rules=RULES, **kw)


async def drive_every_v1_path() -> None:
    """Runs whose v1 projections hold every v1 type (each goes through conftest's checks)."""
    lookup_1 = call("lookup", "l", order="1")
    asked = {"text": "Looking.", "tool_calls": [lookup_1, call("refund", "r", order="1", amount=2)]}
    await run_agent(agent(scripted(asked, "refunded")), approver=approve_all)
    await run_agent(agent(scripted({"tool_calls": [lookup_1, call("wipe", "w")]})))
    await run_agent(agent(scripted({"tool_calls": [lookup_1]}), max_turns=1))
    await run_agent(agent(scripted(asked)))  # paused on the approval
    await run_agent(agent(scripted({"tool_calls": [call("ask_user", "q", question="Size?")]})))
    await run_agent(agent(scripted({"tool_calls": [call("load_skill")]}, "ok")))
    await run_agent(agent(scripted({"fail": {"error": "boom"}})))
    too_long = {"fail": {"error": "prompt is too long", "prompt_too_long": True}}
    session = Session(agent(scripted("one", too_long, "summary", "two"), compaction=Compaction()))
    await drive(session.run("first"))
    await drive(session.run("second"))


async def test_ours_is_loopengines_v1_schema():
    given_path = os.environ.get("LOOPENGINE_V1_SCHEMA")
    if not given_path:
        pytest.skip("LOOPENGINE_V1_SCHEMA names no copy of loopengine's v1 schema to compare with")
    theirs = json.loads(Path(given_path).read_text())
    ours_by_type, theirs_by_type = event_definitions(V1_SCHEMA), event_definitions(theirs)
    assert set(ours_by_type) == set(theirs_by_type)
    for wire_type, definition in theirs_by_type.items():
        ours = ours_by_type[wire_type]
        assert shape(V1_SCHEMA, ours) == shape(theirs, definition), wire_type
        assert ours["additionalProperties"] is definition["additionalProperties"] is False

    await drive_every_v1_path()
    corpus = list(V1.corpus.values())  # every v1 object the suite validated so far, and these
    assert {event["type"] for event in corpus} == set(theirs_by_type)
    loopengine = EventValidator(theirs)
    for event in corpus:
        loopengine.validate(event)  # (V1 accepted each of them already)
