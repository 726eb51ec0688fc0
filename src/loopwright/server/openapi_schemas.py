"""The parts the OpenAPI document (`openapi.document`) is built of: small schema builders, the
path and query parameters, the responses several routes share, and the component schemas
(`components`): the bodies' pydantic models (`api_models`) and the events' own generated
schemas (`loopwright.wire`, as in protocol/), so that `Event` is the whole tagged union. The
paths that use them are `openapi`'s."""

from __future__ import annotations

import functools
from typing import Any

from pydantic.json_schema import models_json_schema

from ..wire import event_schema, v1_event_schema
from .api_models import MODELS

Schema = dict[str, Any]

OBJECT: Schema = {"type": "object"}
ARRAY: Schema = {"type": "array"}
STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: list[str], **properties: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": properties}


def as_json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(description: str) -> Schema:
    return as_json(ref("ErrorBody"), description)


NAME = {"name": "name", "in": "path", "required": True, "schema": STRING}
ID = {"name": "id", "in": "path", "required": True, "schema": STRING}
PROFILE = {
    "name": "profile",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["full", "v1"]},
    "description": "`v1`: loopengine v1's bodies and only its events (valid against its "
    "schema). Default: `[server] profile` (`full` unless set); under the `/v1` server always v1.",
}
AFTER = {
    "name": "after",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 0},
    "description": "Only events with a larger sequence number.",
}
LIMIT = {
    "name": "limit",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
    "description": "At most this many entries (default 100).",
}
CURSOR = {
    "name": "cursor",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]*$", "maxLength": 400},
    "description": "The `nextCursor` of the previous page (none: the first page).",
}
EVENT_LIMIT = {
    "name": "limit",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 1, "maximum": 5000},
    "description": "At most this many events (default 500); `nextAfter` reads on.",
}
PAGE_ERROR = {"400": error("A bad limit or cursor.")}
SSE = {
    "description": "Server-sent events: `event: <type>`, `id: <seq>` (only on events the log "
    "holds when they are sent: token deltas and events not committed yet have none, so "
    "Last-Event-ID resumes without a gap), `data: <json>`.",
    "content": {
        "text/event-stream": {
            "schema": {  # one server-sent event
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": STRING,
                    "id": {"type": "string", "pattern": "^[0-9]+$"},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                },
            }
        }
    },
}
TOO_MANY = error("The tenant holds too many runs or streams at once (see Retry-After).")
RUN_RESPONSES = {
    "200": as_json(ref("Final"), "The run ended."),
    "202": as_json(ref("Paused"), "The run paused on a pending item (the first open one)."),
    "400": error("Invalid JSON or fields."),
    "404": error("Unknown agent, session or pending item."),
    "409": error("The session is running or paused on pending items."),
    "413": error("The body is over the limit."),
    "429": TOO_MANY,
    "500": error("The run failed (the v1 profile; the full profile answers 200)."),
}


TAGS = [
    {"name": "Agents", "description": "The project's agents and their configuration."},
    {"name": "Runs", "description": "Send a message: the answer is the run's end or pause."},
    {"name": "Sessions", "description": "Read a session and its events; act on its run."},
    {"name": "Pending items", "description": "Approvals and questions, and their decisions."},
    {"name": "Usage and rules", "description": "Model usage; rules tried on stored calls."},
    {"name": "Notifications", "description": "Webhook deliveries and approval links."},
    {
        "name": "Events",
        "description": "Every event a run logs or streams: a tagged union on `type`, generated "
        "from `loopwright.events` (protocol/loop-event.schema.json; PROTOCOL.md tells the order "
        'they come in).\n\n<SchemaDefinition schemaRef="#/components/schemas/Event" />',
    },
]
"""The document's sections (Redoc shows `Events`' schema as a section of its own)."""


def tagged(paths: dict[str, Schema]) -> dict[str, Schema]:
    """`paths` with each operation in its section (`TAGS`) and named by its method and path
    (`post-agents-name-messages`)."""
    for path, item in paths.items():
        for method, operation in item.items():
            operation["tags"] = [_section(path)]
            words = "".join(c if c.isalnum() else " " for c in path).split()
            operation["operationId"] = "-".join([method, *words])
    return paths


def _section(path: str) -> str:
    if path.endswith(("/approvals", "/questions")) or path.startswith(
        ("/approvals/", "/questions/", "/pending")
    ):
        return "Pending items"
    if path.startswith(("/notifications", "/links/")):
        return "Notifications"
    if path.startswith(("/usage", "/rules/")):
        return "Usage and rules"
    if "/sessions" in path:
        return "Sessions"
    return "Runs" if "/messages" in path or path.endswith("/agui") else "Agents"


def components() -> dict[str, Schema]:
    """Every component schema: the models', the events' (`Event`, the full vocabulary's tagged
    union; `V1Event`, the v1 profile's, its definitions that differ named `V1...`), `AnyEvent`
    (either: a body's events are in the request's profile) and `Events` (a list of them)."""
    return _components()


@functools.cache
def _components() -> dict[str, Schema]:
    _, generated = models_json_schema(
        [(model, "serialization") for model in MODELS], ref_template=_REF + "{model}"
    )
    schemas: dict[str, Schema] = {}
    for name, definition in generated["$defs"].items():
        required = definition.get("required", [])
        for field, prop in definition.get("properties", {}).items():
            prop.pop("title", None)  # ("Sessionid": the field's name says it better)
            if field not in required:
                _absent_not_null(prop)
        schemas[name] = linked(definition)
    full, v1 = event_schema(), v1_event_schema()
    events: dict[str, Schema] = {}
    for name, definition in full["$defs"].items():
        events[name] = _moved(definition, {})
    renamed = {
        name: f"V1{name}"
        for name, definition in v1["$defs"].items()
        if definition != full["$defs"][name]
    }
    for name, new in renamed.items():
        events[new] = _moved(v1["$defs"][name], renamed)
    events["Event"] = _union(full, {}, "Any event, as the full profile sends it (PROTOCOL.md).")
    events["V1Event"] = _union(v1, renamed, "An event as the v1 profile (`profile=v1`) sends it.")
    events["AnyEvent"] = {"anyOf": [ref("Event"), ref("V1Event")]}
    events["Events"] = {"type": "array", "items": ref("AnyEvent")}
    clash = schemas.keys() & events.keys()
    assert not clash, f"a body model is named as an event: {sorted(clash)}"
    return schemas | events


_REF = "#/components/schemas/"


def _absent_not_null(prop: Schema) -> None:
    """An optional field's schema as the server sends it: left out when it has no value, so
    neither null nor a default, unless marked `api_models.nullable`."""
    if prop.get("default", ...) is None:
        del prop["default"]
    if prop.pop("x-nullable", False):
        return
    options = prop.get("anyOf", [])
    if {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        del prop["anyOf"]
        prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})


def linked(schema: Any) -> Any:
    """`schema` with `{"x-component": name, ...}` (`api_models.replaced`) made a `$ref`."""
    if isinstance(schema, list):
        return [linked(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: linked(value) for key, value in schema.items()}
    name = out.pop("x-component", None)
    return out if name is None else {"$ref": _REF + name, **out}


def _moved(schema: Any, renamed: dict[str, str]) -> Any:
    """`schema` with its `#/$defs/X` references pointing at the components (renamed ones)."""
    if isinstance(schema, list):
        return [_moved(item, renamed) for item in schema]
    if isinstance(schema, str) and schema.startswith("#/$defs/"):
        name = schema.removeprefix("#/$defs/")
        return _REF + renamed.get(name, name)
    if not isinstance(schema, dict):
        return schema
    return {key: _moved(value, renamed) for key, value in schema.items()}


def _union(schema: Schema, renamed: dict[str, str], description: str) -> Schema:
    return {
        "description": description,
        "oneOf": _moved(schema["oneOf"], renamed),
        "discriminator": _moved(schema["discriminator"], renamed),
    }
