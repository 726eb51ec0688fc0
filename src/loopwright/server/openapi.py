"""The OpenAPI 3.1 document of the HTTP API (`GET /openapi.json`), written out by hand next to
the routes it describes; schemathesis runs against it in the test suite."""

from __future__ import annotations

from typing import Any

from . import links, usage
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


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: list[str], **properties: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": properties}


def _json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> Schema:
    return _json(_ref("Error"), description)


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
PAGE_ERROR = {"400": _error("A bad limit or cursor.")}
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
EVENT_PAGE = _object(
    ["events", "nextAfter", "more"],
    events={
        "type": "array",
        "items": _object(["seq", "at", "event"], seq=INTEGER, at=STRING, event=_ref("Event")),
    },
    nextAfter={"type": "integer", "description": "The `after` of the next read."},
    more={"type": "boolean", "description": "Events past this page were in the log."},
)
TOO_MANY = _error("The tenant holds too many runs or streams at once (see Retry-After).")
RUN_RESPONSES = {
    "200": _json(_ref("Final"), "The run ended."),
    "202": _json(_ref("Paused"), "The run paused on a pending item (the first open one)."),
    "400": _error("Invalid JSON or fields."),
    "404": _error("Unknown agent, session or pending item."),
    "409": _error("The session is running or paused on pending items."),
    "413": _error("The body is over the limit."),
    "429": TOO_MANY,
    "500": _error("The run failed (the v1 profile; the full profile answers 200)."),
}


def _op(
    summary: str,
    responses: dict[str, Schema],
    *params: Schema,
    body: Schema | None = None,
    required: bool = True,
) -> Schema:
    every = {
        "401": _error("A bearer token is required (tokens are configured) and was not given."),
        "403": _error("The Host header names another server, or the client is not on loopback."),
        "503": _error("The server serves all the requests it may at once (see Retry-After)."),
    }
    if NAME in params:
        every["404"] = _error("Unknown agent (or session, or another tenant's).")
    if body is not None:
        every |= {"400": _error("Invalid JSON or fields."), "413": _error("Body over the limit.")}
    op: Schema = {
        "summary": summary,
        "parameters": list(params),
        "responses": every | responses,
    }
    if body is not None:
        op["requestBody"] = {
            "required": required,
            "content": {"application/json": {"schema": body}},
        }
    return op


MESSAGE = _object(
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
STEER = _object(["message"], message={"type": "string", "minLength": 1})
APPROVE = _object([], args=OBJECT, editedArgs=OBJECT, by=STRING)
DENY = _object([], reason=STRING, by=STRING)
DECIDE = _object(
    ["decision"],
    decision={"enum": ["approve", "deny"]},
    editedArgs=OBJECT,
    reason=STRING,
    by=STRING,
)
ANSWER = _object(["answer"], answer=STRING, by=STRING)

SCHEMAS: dict[str, Schema] = {
    "Error": _object(["error"], error=STRING),
    "Event": {
        "type": "object",
        "required": ["type"],
        "properties": {"type": STRING},
        "description": "One event; see protocol/loop-event.schema.json and PROTOCOL.md.",
    },
    "Final": _object(  # (v1: stopReason only when max_turns or denied, never error)
        ["text", "sessionId", "events"],
        text=STRING,
        sessionId=STRING,
        events=EVENTS,
        stopReason=STRING,
        error=STRING,
        output={"description": "A completed run's structured output (docs/output.md)."},
        stopDetail={"enum": ["max_tokens"], "description": "The answer was cut off."},
    ),
    "Paused": _object(
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
    "AlreadyResolved": _object(
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


def _listing(key: str) -> Schema:
    return _json(_object([key], **{key: {"type": "array", "items": _ref("Item")}}), "Open items.")


def _paged(key: str, items: Schema, description: str) -> Schema:
    listed = _object([key, "nextCursor"], **{key: {"type": "array", "items": items}})
    listed["properties"]["nextCursor"] = NEXT_CURSOR
    return {"200": _json(listed, description), **PAGE_ERROR}


def _resolution(summary: str, body: Schema, required: bool) -> Schema:
    return {
        "post": _op(
            summary,
            {
                **RUN_RESPONSES,
                "200": _json(
                    {"oneOf": [_ref("Final"), _ref("AlreadyResolved")]},
                    "The resumed run ended, or the item was already resolved.",
                ),
                "202": _json(_ref("Paused"), "Items of the batch are still open (the next one)."),
            },
            ID,
            PROFILE,
            body=body,
            required=required,
        )
    }


def _durable(summary: str, body: Schema) -> Schema:
    durable = {
        "oneOf": [
            _object(["alreadyResolved"], alreadyResolved={"const": True}),
            _object(["resolved", "outstanding"], resolved={"const": True}, outstanding=INTEGER),
            _object(
                ["text", "sessionId"],
                text=STRING,
                sessionId=STRING,
                stopReason=STRING,
            ),
        ]
    }
    responses = {
        "200": _json(durable, "Already resolved; recorded with items still open; or the run."),
        "404": _error("Unknown pending item (or another tenant's)."),
        "409": _error("Recorded, but the run cannot resume here."),
        "429": TOO_MANY,
    }
    return {"post": _op(summary, responses, ID, body=body)}


def document(version: str) -> Schema:
    """The document, with this package's version."""
    session = "/agents/{name}/sessions/{id}"
    ok = _json(OBJECT, "OK.")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "loopwright",
            "version": version,
            "description": "Every agent of a project behind HTTP: loopengine v1 routes and "
            'shapes, plus richer events. Errors are {"error": "<sentence>"}. The same paths '
            "are served under `/v1` in loopengine v1's profile (a v1 client given the base URL "
            "`http://host:8787/v1` gets v1 bodies and events on every route).",
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
        "paths": {
            "/health": {"get": _op("Liveness and version", {"200": ok})},
            "/agents": {"get": _op("List the agents", {"200": ok})},
            "/agents/{name}/config": {
                "get": _op("An agent's resolved configuration", {"200": ok}, NAME)
            },
            "/agents/{name}/messages": {
                "post": _op(
                    "Send a message; answer when the run ends or pauses",
                    RUN_RESPONSES,
                    NAME,
                    PROFILE,
                    body=MESSAGE,
                )
            },
            "/agents/{name}/messages/stream": {
                "post": _op(
                    "Send a message; stream the run as SSE (held: an ask waits for a decision "
                    "made anywhere and the run goes on in this stream; closing it pauses the run)",
                    {**RUN_RESPONSES, "200": SSE},
                    NAME,
                    PROFILE,
                    body=MESSAGE,
                )
            },
            "/agents/{name}/sessions": {
                "get": _op(
                    "The tenant's sessions of this agent, most recently updated first (a page)",
                    _paged("sessions", OBJECT, "One page of sessions."),
                    NAME,
                    LIMIT,
                    CURSOR,
                )
            },
            session: {
                "get": _op(
                    "A session: status, history, open items (v1: `{sessionId, history}` in "
                    "v1's message shape, and 200 with an empty history for an unknown session)",
                    {
                        "200": ok,
                        "400": _error("Bad profile."),
                        "404": _error("Unknown session (full profile)."),
                    },
                    NAME,
                    ID,
                    PROFILE,
                )
            },
            f"{session}/events": {
                "get": _op(
                    "The session's logged events after a sequence number, a page at a time "
                    "(SSE with Accept: text/event-stream: all of them, then the runs as they "
                    "go; Last-Event-ID resumes)",
                    {
                        "200": _json(EVENT_PAGE, "One page of events."),
                        "400": _error("Bad sequence number or limit."),
                        "429": TOO_MANY,
                    },
                    NAME,
                    ID,
                    AFTER,
                    EVENT_LIMIT,
                    PROFILE,
                )
            },
            f"{session}/stream": {
                "get": _op(
                    "Replay the session's events as SSE, then its runs as they go (across "
                    "pauses, up to a run's end that is not a pause)",
                    {"200": SSE, "400": _error("Bad sequence number."), "429": TOO_MANY},
                    NAME,
                    ID,
                    AFTER,
                    PROFILE,
                )
            },
            f"{session}/cancel": {"post": _op("Cancel the session's run", {"200": ok}, NAME, ID)},
            f"{session}/steer": {
                "post": _op(
                    "Steer the running run",
                    {"202": ok, "409": _error("Not running.")},
                    NAME,
                    ID,
                    body=STEER,
                )
            },
            f"{session}/compact": {
                "post": _op(
                    "Compact the session's history now",
                    {
                        "200": ok,
                        "400": _error("Bad profile."),
                        "409": _error("Busy."),
                        "429": TOO_MANY,
                    },
                    NAME,
                    ID,
                    PROFILE,
                )
            },
            f"{session}/resume": {
                "post": _op(
                    "Resume a paused session whose items are all resolved",
                    RUN_RESPONSES,
                    NAME,
                    ID,
                    PROFILE,
                )
            },
            "/agents/{name}/approvals": {
                "get": _op(
                    "Open approvals (a page)",
                    _paged("approvals", _ref("Item"), "Open items."),
                    NAME,
                    LIMIT,
                    CURSOR,
                )
            },
            "/agents/{name}/questions": {
                "get": _op(
                    "Open questions (a page)",
                    _paged("questions", _ref("Item"), "Open items."),
                    NAME,
                    LIMIT,
                    CURSOR,
                )
            },
            f"{session}/approvals": {
                "get": _op("A session's open approvals", {"200": _listing("approvals")}, NAME, ID)
            },
            f"{session}/questions": {
                "get": _op("A session's open questions", {"200": _listing("questions")}, NAME, ID)
            },
            "/pending": {
                "get": _op(
                    "Every open item of the tenant (a page)",
                    _paged("items", _ref("Item"), "Open items."),
                    LIMIT,
                    CURSOR,
                )
            },
            "/usage": {
                "get": _op(
                    "The tenant's model usage summed by group (a page of groups)",
                    {
                        **_paged("groups", _ref("Usage"), "One page of groups, in key order."),
                        "404": _error("Unknown agent."),
                    },
                    *usage.QUERY,
                    LIMIT,
                    CURSOR,
                )
            },
            "/approvals/{id}/approve": _resolution(
                "Approve (optionally with edited arguments)", APPROVE, False
            ),
            "/approvals/{id}/deny": _resolution(
                "Deny (the batch's other items are skipped)", DENY, False
            ),
            "/questions/{id}/answer": _resolution("Answer a question", ANSWER, True),
            "/pending-approvals/{id}/resolve": _durable(
                "Approve or deny (loopengine v1's durable route)", DECIDE
            ),
            "/pending-questions/{id}/answer": _durable(
                "Answer a question (loopengine v1's durable route)", ANSWER
            ),
            **links.PATHS,
            "/notifications": {
                "get": _op(
                    "The tenant's webhook deliveries, newest first, with every attempt (a page)",
                    _paged("deliveries", links.DELIVERY, "Deliveries, newest first, by target."),
                    {"name": "item", "in": "query", "required": False, "schema": STRING},
                    LIMIT,
                    CURSOR,
                )
            },
        },
    }
