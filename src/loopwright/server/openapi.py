"""The OpenAPI 3.1 document of the HTTP API (`GET /openapi.json`), written out by hand next to
the routes it describes; schemathesis runs against it in the test suite. This module lays out
the paths and their operations; the parameters, bodies and component schemas they use are in
`openapi_schemas`."""

from __future__ import annotations

from . import links, rules_check, trace, usage
from .openapi_schemas import (
    AFTER,
    ANSWER,
    APPROVE,
    CURSOR,
    DECIDE,
    DENY,
    EVENT_LIMIT,
    EVENT_PAGE,
    FORK,
    FORKED,
    ID,
    INTEGER,
    LIMIT,
    MESSAGE,
    NAME,
    NEXT_CURSOR,
    OBJECT,
    PAGE_ERROR,
    PROFILE,
    RUN_RESPONSES,
    SCHEMAS,
    SSE,
    STEER,
    STRING,
    TOO_MANY,
    Schema,
    as_json,
    error,
    obj,
    ref,
)


def _op(
    summary: str,
    responses: dict[str, Schema],
    *params: Schema,
    body: Schema | None = None,
    required: bool = True,
) -> Schema:
    every = {
        "401": error("A bearer token is required (tokens are configured) and was not given."),
        "403": error("The Host header names another server, or the client is not on loopback."),
        "503": error("The server serves all the requests it may at once (see Retry-After)."),
    }
    if NAME in params:
        every["404"] = error("Unknown agent (or session, or another tenant's).")
    if body is not None:
        every |= {"400": error("Invalid JSON or fields."), "413": error("Body over the limit.")}
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


def _listing(key: str) -> Schema:
    return as_json(obj([key], **{key: {"type": "array", "items": ref("Item")}}), "Open items.")


def _paged(key: str, items: Schema, description: str) -> Schema:
    listed = obj([key, "nextCursor"], **{key: {"type": "array", "items": items}})
    listed["properties"]["nextCursor"] = NEXT_CURSOR
    return {"200": as_json(listed, description), **PAGE_ERROR}


def _resolution(summary: str, body: Schema, required: bool) -> Schema:
    return {
        "post": _op(
            summary,
            {
                **RUN_RESPONSES,
                "200": as_json(
                    {"oneOf": [ref("Final"), ref("AlreadyResolved")]},
                    "The resumed run ended, or the item was already resolved.",
                ),
                "202": as_json(ref("Paused"), "Items of the batch are still open (the next one)."),
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
            obj(["alreadyResolved"], alreadyResolved={"const": True}),
            obj(["resolved", "outstanding"], resolved={"const": True}, outstanding=INTEGER),
            obj(
                ["text", "sessionId"],
                text=STRING,
                sessionId=STRING,
                stopReason=STRING,
            ),
        ]
    }
    responses = {
        "200": as_json(durable, "Already resolved; recorded with items still open; or the run."),
        "404": error("Unknown pending item (or another tenant's)."),
        "409": error("Recorded, but the run cannot resume here."),
        "429": TOO_MANY,
    }
    return {"post": _op(summary, responses, ID, body=body)}


def document(version: str) -> Schema:
    """The document, with this package's version."""
    session = "/agents/{name}/sessions/{id}"
    ok = as_json(OBJECT, "OK.")
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
                    "v1's message shape, and 200 with an empty history for an unknown session). "
                    "With `limit` or `cursor` (full profile), one page of the history, read "
                    "backwards: the newest `limit` messages, then `nextCursor` reads the ones "
                    "before them (null at the first message); a page adds `historyStart` (the "
                    "index of its first message), `historyLength` and `nextCursor`",
                    {
                        "200": ok,
                        "400": error("Bad profile, limit or cursor."),
                        "404": error("Unknown session (full profile)."),
                    },
                    NAME,
                    ID,
                    PROFILE,
                    LIMIT,
                    CURSOR,
                )
            },
            f"{session}/events": {
                "get": _op(
                    "The session's logged events after a sequence number, a page at a time "
                    "(SSE with Accept: text/event-stream: all of them, then the runs as they "
                    "go; Last-Event-ID resumes)",
                    {
                        "200": as_json(EVENT_PAGE, "One page of events."),
                        "400": error("Bad sequence number or limit."),
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
                    {"200": SSE, "400": error("Bad sequence number."), "429": TOO_MANY},
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
                    {"202": ok, "409": error("Not running.")},
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
                        "400": error("Bad profile."),
                        "409": error("Busy."),
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
            f"{session}/replay": {
                "post": _op(
                    "Replay the stored session against the agent as it is now (docs/replay.md)",
                    {"200": ok, "400": error("Invalid JSON, or an unknown model.")},
                    NAME,
                    ID,
                    body=obj([], model=STRING),
                    required=False,
                )
            },
            f"{session}/fork": {
                "post": _op(
                    "Fork the session: a new one with its history up to a seq (docs/fork.md)",
                    {
                        "201": as_json(FORKED, "The new session and its lineage."),
                        "409": error("The new session's id is in use."),
                        "422": error("The seq is not one of the session's."),
                    },
                    NAME,
                    ID,
                    body=FORK,
                    required=False,
                )
            },
            "/agents/{name}/approvals": {
                "get": _op(
                    "Open approvals (a page)",
                    _paged("approvals", ref("Item"), "Open items."),
                    NAME,
                    LIMIT,
                    CURSOR,
                )
            },
            "/agents/{name}/questions": {
                "get": _op(
                    "Open questions (a page)",
                    _paged("questions", ref("Item"), "Open items."),
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
                    _paged("items", ref("Item"), "Open items."),
                    LIMIT,
                    CURSOR,
                )
            },
            "/usage": {
                "get": _op(
                    "The tenant's model usage summed by group (a page of groups)",
                    {
                        **_paged("groups", ref("Usage"), "One page of groups, in key order."),
                        "404": error("Unknown agent."),
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
            **rules_check.PATHS,
            **trace.PATHS,
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
