"""JSON in and out, at the edges only: events and messages on the wire, and the v1 profile.

One alias rule (snake_case in Python, camelCase on the wire) and one pydantic adapter per type,
built lazily, so importing the core costs nothing here. Optional fields that are unset are left
out of the JSON (never `null`), which keeps v1 objects valid under `additionalProperties: false`.

Everything serialised here leaves the process or is stored, so it is redacted here
(`loopwright.redact`, RELIABILITY P11): the provider keys and bearer tokens in use and
well-known key shapes become `[redacted]` in `dumps`, `to_dict` and `messages_to_json` — the
event log, checkpoints, HTTP bodies, SSE, exports. The events themselves keep raw values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, overload

from . import events as ev
from . import redact
from .messages import Message
from .state.lifecycle import LifecycleEvent

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_core import SchemaSerializer

Profile: TypeAlias = Literal["full", "v1"]
V1_STOP_REASONS = frozenset({"max_turns", "denied"})


@cache
def _adapter(cls: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


@cache
def _serializer(cls: Any) -> SchemaSerializer:
    """One event type's serialiser, called without its adapter's `dump_*` in between."""
    return _adapter(cls).serializer


@cache
def _event_adapter() -> TypeAdapter[Any]:
    from pydantic import Field, TypeAdapter

    return TypeAdapter(Annotated[ev.Event, Field(discriminator="type")])


@cache
def _published_adapter() -> TypeAdapter[Any]:
    """A run's events and a runtime's lifecycle notifications (`state.lifecycle`): the schema."""
    from pydantic import Field, TypeAdapter

    return TypeAdapter(Annotated[ev.Event | LifecycleEvent, Field(discriminator="type")])


@cache
def _v1_event_adapter() -> TypeAdapter[Any]:
    from pydantic import Field, TypeAdapter

    return TypeAdapter(Annotated[ev.V1Event, Field(discriminator="type")])


@cache
def _messages_adapter() -> TypeAdapter[Any]:
    from pydantic import Field, TypeAdapter

    return TypeAdapter(list[Annotated[Message, Field(discriminator="role")]])


def to_dict(event: ev.Event | LifecycleEvent, profile: Profile = "full") -> dict[str, Any] | None:
    """The JSON object for one event (redacted), or None when `profile` leaves it out."""
    if profile == "v1":
        return _to_v1(event)
    serializer = _serializer(type(event))  # type: ignore[arg-type]
    data: dict[str, Any] = serializer.to_python(
        event, mode="json", by_alias=True, exclude_none=True
    )
    text = serializer.to_json(event, by_alias=True, exclude_none=True).decode()
    return redact.deep(data) if redact.may_hold(text) else data  # (one search: the cheapest)


@overload
def dumps(event: ev.Event | LifecycleEvent) -> str: ...
@overload
def dumps(event: ev.Event | LifecycleEvent, profile: Profile) -> str | None: ...
def dumps(event: ev.Event | LifecycleEvent, profile: Profile = "full") -> str | None:
    """One compact JSON line for an event (redacted), or None when `profile` leaves it out."""
    if profile == "full":
        serializer = _serializer(type(event))  # type: ignore[arg-type]
        text = serializer.to_json(event, by_alias=True, exclude_none=True).decode()
        return redact.json_text(text)
    data = to_dict(event, profile)
    return None if data is None else json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def dumps_all(events: Iterable[ev.Event]) -> list[str]:
    """`dumps` of each event, the redaction's screens run once over them all (one search per
    anchor for a commit's events, not per event): the same texts."""
    serializer = _serializer
    texts = [
        serializer(type(e)).to_json(e, by_alias=True, exclude_none=True).decode()  # type: ignore[arg-type]
        for e in events
    ]
    if len(texts) > 1 and not redact.may_hold("\n".join(texts)):  # (no JSON text holds "\n")
        return texts
    return [redact.json_text(text) for text in texts]


def loads(data: str | bytes | dict[str, Any]) -> ev.Event:
    """Parse one event from JSON (or an already-decoded object); raises on unknown shapes."""
    adapter = _event_adapter()
    if isinstance(data, dict):
        return adapter.validate_python(data)  # type: ignore[no-any-return]
    return adapter.validate_json(data)  # type: ignore[no-any-return]


def messages_to_json(messages: list[Message]) -> str:
    """The JSON array of a history (redacted)."""
    text = _messages_adapter().dump_json(messages, by_alias=True, exclude_none=True).decode()
    return redact.json_text(text)


def messages_from_json(data: str | bytes) -> list[Message]:
    return _messages_adapter().validate_json(data)  # type: ignore[no-any-return]


def _to_v1(event: ev.Event | LifecycleEvent) -> dict[str, Any] | None:
    """The loopengine v1 projection: v1 types as they are, `loop:error` as v1 `error`, a
    subagent's pending item as the parent's own (`_subagent_item`), the rest dropped. v1
    `done.stopReason` only knows `max_turns` and `denied`."""
    if isinstance(event, ev.LoopError):
        return {"type": "error", "error": redact.text(event.error)}
    if isinstance(event, ev.SubagentEvent):
        return _subagent_item(event)
    if event.type not in ev.V1_TYPES:
        return None
    data = to_dict(event)
    assert data is not None
    if isinstance(event, ev.Done) and event.stop_reason not in V1_STOP_REASONS:
        del data["stopReason"]
    elif isinstance(event, ev.ToolStarted):
        data.pop("idempotencyKey", None)  # (additive: not a v1 field)
        data.pop("label", None)
    elif isinstance(event, ev.ApprovalPending):
        data.pop("label", None)  # (additive: not a v1 field)
    return data


def _subagent_item(event: ev.SubagentEvent) -> dict[str, Any] | None:
    """What v1 shows of a subagent's run (nested ones too): only what a human must answer, its
    `approval:pending` or `question:pending` as the parent's own, with the child's scope (its
    `scope` names the child agent; a question's `agent` and `sessionId` are the child's), by
    the id the top-level approval and question routes resolve. The rest of the child's run stays
    inside the parent's call, whose `tool:result` v1 sees when the call ends (as loopengine
    shows a live question between a call's `tool:started` and its result)."""
    inner = event.event
    while isinstance(inner, ev.SubagentEvent):
        inner = inner.event
    if isinstance(inner, ev.ApprovalPending):
        return _to_v1(inner)
    if isinstance(inner, ev.QuestionPending):
        return to_dict(inner)
    return None


def event_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the whole event vocabulary, generated from the classes."""
    schema = _published_adapter().json_schema(by_alias=True, mode="serialization")
    for definition in schema.get("$defs", {}).values():
        _tighten(definition)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://loopwright.dev/protocol/loop-event.schema.json",
        "title": "LoopwrightEvent",
        "description": "Every event loopwright emits (the loopengine v1 vocabulary plus additive "
        "types, and a runtime's lifecycle notifications). Generated from loopwright.events by `python -m loopwright.wire`; see PROTOCOL.md.",
        **{k: v for k, v in schema.items() if k not in {"title", "description"}},
    }


def v1_event_schema() -> dict[str, Any]:
    """JSON Schema of the loopengine v1 profile: every object `to_dict(event, "v1")` can give,
    generated from the v1 classes and refined as `_to_v1` and the v1 wire are (no
    `tool:started.idempotencyKey`, no `label`): `done.stopReason` is optional and only `max_turns` or `denied`, numbers are JSON numbers (v1 has no integer
    type) and `requestedAt` is an RFC 3339 date-time."""
    schema = _v1_event_adapter().json_schema(by_alias=True, mode="serialization")
    definitions: dict[str, Any] = schema.get("$defs", {})
    for definition in definitions.values():
        _tighten(definition)
        for name, prop in definition.get("properties", {}).items():
            if prop.get("type") == "integer":
                prop["type"] = "number"
            if name == "requestedAt":
                prop["format"] = "date-time"
    del definitions["ToolStarted"]["properties"]["idempotencyKey"]  # (left out, as `_to_v1` does)
    del definitions["ToolStarted"]["properties"]["label"]
    del definitions["ApprovalPending"]["properties"]["label"]
    done = definitions["Done"]
    done["properties"]["stopReason"] = {"enum": sorted(V1_STOP_REASONS), "type": "string"}
    done["required"].remove("stopReason")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://loopwright.dev/protocol/loopengine-v1.schema.json",
        "title": "LoopengineV1Event",
        "description": "What a loopengine v1 client receives from loopwright's v1 profile "
        "(`profile=v1`). Generated from loopwright.events by "
        "`python -m loopwright.wire --profile v1`; see PROTOCOL.md.",
        **{k: v for k, v in schema.items() if k not in {"title", "description"}},
    }


def _tighten(definition: dict[str, Any]) -> None:
    """Make the generated schema say what the wire does: literal tags are required, unset
    optionals are absent rather than null, and no defaults or titles clutter it."""
    properties: dict[str, Any] = definition.get("properties", {})
    required: list[str] = definition.setdefault("required", [])
    for name, prop in properties.items():
        prop.pop("title", None)
        prop.pop("default", None)
        options = prop.get("anyOf")
        if options and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            prop.pop("anyOf")
            prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
            if name in required:
                required.remove(name)
        if "const" in prop and name not in required:
            required.append(name)
    if not required:
        definition.pop("required")


def main(argv: list[str] | None = None) -> None:
    """Print a generated schema: the full vocabulary (`protocol/loop-event.schema.json`) or,
    with `--profile v1`, the v1 profile (`protocol/loopengine-v1.schema.json`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m loopwright.wire", description=main.__doc__)
    parser.add_argument("--profile", choices=["full", "v1"], default="full")
    schema = v1_event_schema() if parser.parse_args(argv).profile == "v1" else event_schema()
    print(json.dumps(schema, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
