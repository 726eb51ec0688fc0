"""The parts the OpenAPI document (`openapi.document`) is built of: small schema builders, the
path and query parameters, the responses several routes share, the request bodies, and the
component schemas (`SCHEMAS`: errors, events, a run's final and paused answers, usage, items).
The paths that use them are `openapi`'s."""

from __future__ import annotations

from typing import Any

from . import usage
from .uploads import SCHEMA as ATTACHMENTS

Schema = dict[str, Any]

OBJECT: Schema = {"type": "object"}
ARRAY: Schema = {"type": "array"}
STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
EVENTS: Schema = {
    "type": "array",
    "items": {"$ref": "#/components/schemas/Event"},
    "description": "Logged events as wire JSON (token deltas are for streams only).",
}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: list[str], **properties: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": properties}


def as_json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(description: str) -> Schema:
    return as_json(ref("Error"), description)


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
NEXT_CURSOR: Schema = {
    "type": ["string", "null"],
    "description": "The cursor of the next page; null at the end (a page may hold fewer "
    "entries than the limit and still have a next one).",
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
EVENT_PAGE = obj(
    ["events", "nextAfter", "more"],
    events={
        "type": "array",
        "items": obj(["seq", "at", "event"], seq=INTEGER, at=STRING, event=ref("Event")),
    },
    nextAfter={"type": "integer", "description": "The `after` of the next read."},
    more={"type": "boolean", "description": "Events past this page were in the log."},
)
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


MESSAGE = obj(
    ["message"],
    message={"type": "string", "minLength": 1},
    sessionId={
        "type": "string",
        "minLength": 1,
        "maxLength": 256,
        "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]*$",
        "description": "Any text but control characters, kept as given (percent-encode it in "
        "paths).",
    },
    attachments=ATTACHMENTS,
    settings={
        "type": "object",
        "description": "Model settings for this run, laid over the agent's: agent.yaml's "
        "`settings:` keys (temperature, top_p, stop, max_output_tokens, reasoning, metadata, "
        "extra). Invalid, or refused by the agent's model: 400 naming the setting.",
    },
)
STEER = obj(["message"], message={"type": "string", "minLength": 1})
FORK = obj(
    [],
    at={"type": "integer", "description": "The last seq copied (default: the session's last)."},
    sessionId={"type": "string", "description": "The new session's id (default: a fresh one)."},
)
FORKED = obj(
    ["sessionId", "agent", "status", "lastSeq", "forkedFrom"],
    sessionId=STRING,
    agent=STRING,
    status=STRING,
    lastSeq=INTEGER,
    forkedFrom=obj(["session", "seq"], session=STRING, seq=INTEGER),
)
APPROVE = obj([], args=OBJECT, editedArgs=OBJECT, by=STRING)
DENY = obj([], reason=STRING, by=STRING)
DECIDE = obj(
    ["decision"],
    decision={"enum": ["approve", "deny"]},
    editedArgs=OBJECT,
    reason=STRING,
    by=STRING,
)
ANSWER = obj(["answer"], answer=STRING, by=STRING)

SCHEMAS: dict[str, Schema] = {
    "Error": obj(["error"], error=STRING),
    "Event": {
        "type": "object",
        "required": ["type"],
        "properties": {"type": STRING},
        "description": "One event; see protocol/loop-event.schema.json and PROTOCOL.md.",
    },
    "Final": obj(  # (v1: stopReason only when max_turns or denied, never error)
        ["text", "sessionId", "events"],
        text=STRING,
        sessionId=STRING,
        events=EVENTS,
        stopReason=STRING,
        error=STRING,
        output={"description": "A completed run's structured output (docs/output.md)."},
        stopDetail={"enum": ["max_tokens"], "description": "The answer was cut off."},
    ),
    "Paused": obj(
        ["pending", "type", "id", "sessionId", "statusUrl", "events"],  # (v1: no stopReason)
        pending={"const": True},
        type={"enum": ["approval", "question"]},
        id=STRING,
        sessionId=STRING,
        tool=STRING,
        args=OBJECT,
        scope=OBJECT,
        reason=STRING,
        approveUrl=STRING,
        denyUrl=STRING,
        question=STRING,
        options={"type": ["array", "null"], "items": STRING},
        answerUrl=STRING,
        statusUrl=STRING,
        events=EVENTS,
        stopReason={"const": "paused"},
        pendingIds={"type": "array", "items": STRING},
    ),
    "AlreadyResolved": obj(
        ["alreadyResolved", "id", "status", "sessionId"],
        alreadyResolved={"const": True},
        id=STRING,
        status=STRING,
        decidedBy={"type": ["string", "null"]},
        sessionId=STRING,
    ),
    "Usage": usage.SCHEMA,
    "Item": {
        "type": "object",
        "required": ["id", "sessionId", "agent", "requestedAt"],
        "description": "A pending approval (tool, args, scope, reason, approveUrl, denyUrl) or "
        "question (question, options, answerUrl); `type` in mixed lists.",
    },
}
