"""The OpenAPI 3.1 document of the HTTP API (`GET /openapi.json`, read at `GET /docs`): the
paths and their operations, laid out here; their bodies are the pydantic models of `api_models`
and the events' generated schemas (`openapi_schemas.components`). schemathesis runs against it
in the test suite, and tests/test_openapi_responses.py validates real answers against it."""

from __future__ import annotations

from . import a2a, admin, agui, links, results, usage
from .openapi_schemas import (
    AFTER,
    CURSOR,
    EVENT_LIMIT,
    ID,
    LIMIT,
    NAME,
    PAGE_ERROR,
    PROFILE,
    RUN_RESPONSES,
    SSE,
    TAGS,
    TOO_MANY,
    Schema,
    as_json,
    components,
    error,
    ref,
    tagged,
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
    short = summary.partition(" (")[0]  # (the rest in the description: the summary is a title)
    op: Schema = {
        "summary": short,
        **({"description": summary} if short != summary else {}),
        "parameters": list(params),
        "responses": every | responses,
    }
    if body is not None:
        op["requestBody"] = {
            "required": required,
            "content": {"application/json": {"schema": body}},
        }
    return op


def _paged(model: str, description: str) -> Schema:
    return {"200": as_json(ref(model), description), **PAGE_ERROR}


def _resolution(summary: str, body: Schema, required: bool) -> Schema:
    return {
        "post": _op(
            summary,
            {
                **RUN_RESPONSES,
                "200": as_json(
                    {"anyOf": [ref("Final"), ref("AlreadyResolved")]},
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
    responses = {
        "200": as_json(ref("Durable"), "Already resolved; recorded, items still open; the run."),
        "404": error("Unknown pending item (or another tenant's)."),
        "409": error("Recorded, but the run cannot resume here."),
        "429": TOO_MANY,
    }
    return {"post": _op(summary, responses, ID, body=body)}


def document(version: str) -> Schema:
    """The document, with this package's version."""
    session = "/agents/{name}/sessions/{id}"
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "loopwright",
            "version": version,
            "description": "Every agent of a project behind HTTP: loopengine v1 routes and "
            'shapes, plus richer events. Errors are `{"error": "<sentence>"}`. The same paths '
            "are served under `/v1` in loopengine v1's profile (a v1 client given the base URL "
            "`http://host:8787/v1` gets v1 bodies and events on every route).",
        },
        "components": {
            "schemas": components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
        "tags": TAGS,
        "paths": tagged(
            {
                "/health": {
                    "get": _op("Liveness and version", {"200": as_json(ref("Health"), "Up.")})
                },
                "/agents": {
                    "get": _op("List the agents", {"200": as_json(ref("Agents"), "The agents.")})
                },
                "/agents/{name}/config": {
                    "get": _op(
                        "An agent's resolved configuration",
                        {"200": as_json(ref("AgentConfig"), "Its configuration.")},
                        NAME,
                    )
                },
                "/agents/{name}/messages": {
                    "post": _op(
                        "Send a message; answer when the run ends or pauses",
                        RUN_RESPONSES,
                        NAME,
                        PROFILE,
                        body=ref("MessageRequest"),
                    )
                },
                "/agents/{name}/messages/stream": {
                    "post": _op(
                        "Send a message; stream the run as SSE (held: an ask waits for a decision "
                        "made anywhere and the run goes on in this stream; closing it pauses the run)",
                        {**RUN_RESPONSES, "200": SSE},
                        NAME,
                        PROFILE,
                        body=ref("MessageRequest"),
                    )
                },
                "/agents/{name}/sessions": {
                    "get": _op(
                        "The tenant's sessions of this agent, most recently updated first (a page)",
                        _paged("Sessions", "One page of sessions."),
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
                            "200": as_json(ref("SessionView"), "The session."),
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
                            "200": as_json(ref("EventPage"), "One page of events."),
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
                f"{session}/cancel": {
                    "post": _op(
                        "Cancel the session's run (wait, bounded, for its end)",
                        {"200": as_json(ref("Cancelled"), "Whether it ended cancelled.")},
                        NAME,
                        ID,
                    )
                },
                f"{session}/steer": {
                    "post": _op(
                        "Steer the running run",
                        {"202": as_json(ref("Steered"), "Logged."), "409": error("Not running.")},
                        NAME,
                        ID,
                        body=ref("SteerRequest"),
                    )
                },
                f"{session}/messages": {
                    "post": _op(
                        "Add a custom message to the session's history (full profile)",
                        {"201": as_json(ref("CustomAdded"), "Logged."), "409": error("Busy.")},
                        NAME,
                        ID,
                        body=ref("CustomMessageRequest"),
                    )
                },
                f"{session}/compact": {
                    "post": _op(
                        "Compact the session's history now",
                        {
                            "200": as_json(ref("Compacted"), "Compacted, or why not."),
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
                        {
                            "200": as_json(ref("ReplayAnswer"), "The report."),
                            "400": error("Invalid JSON, or an unknown model."),
                        },
                        NAME,
                        ID,
                        body=ref("ReplayRequest"),
                        required=False,
                    )
                },
                f"{session}/trace": {
                    "get": _op(
                        "The session's steps: durations, tokens and cost, tool calls timed",
                        {"200": as_json(ref("Trace"), "The trace.")},
                        NAME,
                        ID,
                    )
                },
                f"{session}/results/{{ref}}": {"get": _op(*results.OPERATION)},
                f"{session}/fork": {
                    "post": _op(
                        "Fork the session: a new one with its history up to a seq (docs/fork.md)",
                        {
                            "201": as_json(ref("Forked"), "The new session and its lineage."),
                            "409": error("The new session's id is in use."),
                            "422": error("The seq is not one of the session's."),
                        },
                        NAME,
                        ID,
                        body=ref("ForkRequest"),
                        required=False,
                    )
                },
                "/agents/{name}/approvals": {
                    "get": _op(
                        "Open approvals (a page)",
                        _paged("ApprovalPage", "Open approvals."),
                        NAME,
                        LIMIT,
                        CURSOR,
                    )
                },
                "/agents/{name}/questions": {
                    "get": _op(
                        "Open questions (a page)",
                        _paged("QuestionPage", "Open questions."),
                        NAME,
                        LIMIT,
                        CURSOR,
                    )
                },
                f"{session}/approvals": {
                    "get": _op(
                        "A session's open approvals",
                        {"200": as_json(ref("Approvals"), "Open approvals.")},
                        NAME,
                        ID,
                    )
                },
                f"{session}/questions": {
                    "get": _op(
                        "A session's open questions",
                        {"200": as_json(ref("Questions"), "Open questions.")},
                        NAME,
                        ID,
                    )
                },
                "/pending": {
                    "get": _op(
                        "Every open item of the tenant (a page)",
                        _paged("ItemPage", "Open items."),
                        LIMIT,
                        CURSOR,
                    )
                },
                "/usage": {
                    "get": _op(
                        "The tenant's model usage summed by group (a page of groups)",
                        {
                            **_paged("UsagePage", "One page of groups, in key order."),
                            "404": error("Unknown agent."),
                        },
                        *usage.QUERY,
                        LIMIT,
                        CURSOR,
                    )
                },
                "/lifecycle": {
                    "get": _op(
                        "The tenant's lifecycle notifications as SSE from now on (session:created,"
                        " session:status, session:disposed; full profile only)",
                        {"200": SSE, "400": error("agent without session."), "429": TOO_MANY},
                    )
                },
                "/approvals/{id}/approve": _resolution(
                    "Approve (optionally with edited arguments)", ref("ApproveRequest"), False
                ),
                "/approvals/{id}/deny": _resolution(
                    "Deny (the batch's other items are skipped)", ref("DenyRequest"), False
                ),
                "/questions/{id}/answer": _resolution(
                    "Answer a question", ref("AnswerRequest"), True
                ),
                "/pending-approvals/{id}/resolve": _durable(
                    "Approve or deny (loopengine v1's durable route)", ref("DecideRequest")
                ),
                "/pending-questions/{id}/answer": _durable(
                    "Answer a question (loopengine v1's durable route)", ref("AnswerRequest")
                ),
                **links.PATHS,
                **admin.PATHS,
                **(agui.PATHS | a2a.PATHS),  # (the AG-UI and A2A doors)
                "/rules/check": {
                    "post": _op(
                        "Try a rules file on the tenant's stored calls (nothing is run)",
                        {
                            "200": as_json(ref("RulesReport"), "The calls that would change."),
                            "400": error(
                                "Invalid fields; a rules file that does not load (its line)."
                            ),
                            "404": error("Unknown agent."),
                        },
                        body=ref("RulesCheckRequest"),
                        required=False,
                    )
                },
                "/notifications": {
                    "get": _op(
                        "The tenant's webhook deliveries, newest first, with every attempt (a page)",
                        _paged("Deliveries", "Deliveries, newest first, by target."),
                        {
                            "name": "item",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string"},
                        },
                        LIMIT,
                        CURSOR,
                    )
                },
            }
        ),
    }
