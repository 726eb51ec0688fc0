"""A2A (Agent2Agent): every agent of the project as an A2A agent, on the official `a2a-sdk`.

    POST /a2a/{name}                                 JSON-RPC: SendMessage, SendStreamingMessage,
                                                     GetTask, CancelTask (A2A protocol 1.0)
    GET  /a2a/{name}/.well-known/agent-card.json     the agent's card

Behind the same bearer tokens as every route (`front`): the card too, and a task or context of
one tenant is not found by another (the sdk's task store is scoped by the request's tenant; a
`contextId` is a session id of the caller's tenant). `a2a_serve` is the adapter; it is imported
only when a route is used, so the server starts without the `a2a` extra, and these routes then
answer 501 naming it. docs/a2a.md has the conventions (approvals through `input-required`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .openapi_schemas import NAME, Schema, error
from .state import State, state_of
from .views import ApiError

if TYPE_CHECKING:
    from .a2a_serve import Served

EXTRA = "A2A needs the a2a extra: pip install 'loopwright[a2a]'"
CARD = "/.well-known/agent-card.json"


async def rpc(request: Request) -> Response:
    served = _served(request)
    return await served.dispatcher.handle_requests(request)


async def agent_card(request: Request) -> Response:
    served = _served(request)
    from .a2a_serve import card_dict

    return JSONResponse(card_dict(served.card))


def _served(request: Request) -> Served:
    """The agent's endpoint, made on first use (404 for an unknown agent, 501 without the
    extra); a reloaded agent (`loopwright dev`) gets a new card, its tasks kept."""
    state = state_of(request)
    agent = state.agent(request.path_params["name"])
    try:
        from .a2a_serve import Served
    except ImportError:
        raise ApiError(501, EXTRA) from None
    endpoints: dict[str, Served] = _endpoints(request, state)
    served = endpoints.get(agent.name)
    if served is None or served.agent is not agent:
        url = str(request.base_url).rstrip("/") + f"/a2a/{agent.name}"
        kept = served.tasks if served is not None else None
        endpoints[agent.name] = served = Served(state, agent, url, kept)
    return served


def _endpoints(request: Request, state: State) -> dict[str, Served]:
    endpoints: dict[str, Served] | None = getattr(request.app.state, "a2a", None)
    if endpoints is None:
        endpoints = {}
        request.app.state.a2a = endpoints
    return endpoints


_RESPONSES: dict[str, Schema] = {
    "401": error("A bearer token is required (tokens are configured)."),
    "403": error("The Host header names another server, or not on loopback."),
    "404": error("Unknown agent."),
    "501": error("The a2a extra is not installed."),
}

PATHS: dict[str, Schema] = {
    "/a2a/{name}": {
        "post": {
            "summary": "The agent as an A2A agent (JSON-RPC)",
            "description": "A2A protocol 1.0 over JSON-RPC 2.0 (`SendMessage`, "
            "`SendStreamingMessage` answered as SSE, `GetTask`, `CancelTask`), served by the "
            "official a2a-sdk: the body and the answer are the protocol's own (a2a-protocol.org"
            "). A task's contextId is the session id; an approval or question leaves the task "
            "`input-required` and the next message on it answers (docs/a2a.md). Needs the "
            "`a2a` extra (501 without it).",
            "parameters": [NAME],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "description": "A JSON-RPC 2.0 request of the A2A protocol",
                            "required": ["jsonrpc", "method"],
                            "properties": {
                                "jsonrpc": {"type": "string"},
                                "id": {"type": ["string", "integer"]},
                                "method": {"type": "string"},
                                "params": {"type": "object"},
                            },
                        }
                    }
                },
            },
            "responses": {
                **_RESPONSES,
                "200": {
                    "description": "The JSON-RPC response (errors too, as JSON-RPC errors), "
                    "or for SendStreamingMessage the responses as SSE `data:` frames.",
                    "content": {
                        "application/json": {"schema": {"type": "object"}},
                        "text/event-stream": {"schema": {"type": "string"}},
                    },
                },
                "413": error("Body over the limit."),
                "503": error("The server serves all the requests it may at once."),
            },
        }
    },
    "/a2a/{name}" + CARD: {
        "get": {
            "summary": "The agent's A2A agent card",
            "description": "Name, description, the JSON-RPC interface's url, one skill, "
            "streaming; a bearer security scheme when the server has tokens.",
            "parameters": [NAME],
            "responses": {
                **_RESPONSES,
                "200": {
                    "description": "The A2A AgentCard.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
            },
        }
    },
}
"""The routes' OpenAPI operations (their bodies are the A2A protocol's, not ours)."""
