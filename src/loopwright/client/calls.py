"""The requests the client makes, written once for the sync and the async client: each public
operation is an `HttpCall` (method, path, body, query) and a parser of its answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .errors import error_for

JSON_HEADERS = {"Accept": "application/json"}
SSE_HEADERS = {"Accept": "text/event-stream"}


@dataclass(frozen=True, slots=True)
class HttpCall:
    method: str
    path: str
    body: dict[str, Any] | None = None
    params: dict[str, str] | None = None


def _q(part: str) -> str:
    return quote(part, safe="")


def session_path(agent: str, session_id: str) -> str:
    return f"/agents/{_q(agent)}/sessions/{_q(session_id)}"


def page(limit: int | None, cursor: str | None, **more: str | None) -> dict[str, str]:
    query = {"limit": None if limit is None else str(limit), "cursor": cursor, **more}
    return {k: v for k, v in query.items() if v is not None}


def send(
    agent: str,
    message: str,
    session_id: str | None,
    settings: dict[str, Any] | None,
    *,
    stream: bool = False,
) -> HttpCall:
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["sessionId"] = session_id
    if settings is not None:
        body["settings"] = settings
    tail = "/stream" if stream else ""
    return HttpCall("POST", f"/agents/{_q(agent)}/messages{tail}", body)


def decide(
    item_id: str,
    action: str,
    *,
    args: dict[str, Any] | None = None,
    reason: str | None = None,
    answer: str | None = None,
) -> HttpCall:
    if action == "answer":
        return HttpCall("POST", f"/questions/{_q(item_id)}/answer", {"answer": answer})
    body: dict[str, Any] = {}
    if args is not None:
        body["args"] = args
    if reason is not None:
        body["reason"] = reason
    return HttpCall("POST", f"/approvals/{_q(item_id)}/{action}", body)


def session(agent: str, session_id: str, limit: int | None, cursor: str | None) -> HttpCall:
    return HttpCall("GET", session_path(agent, session_id), params=page(limit, cursor))


def sessions(agent: str, limit: int | None, cursor: str | None) -> HttpCall:
    return HttpCall("GET", f"/agents/{_q(agent)}/sessions", params=page(limit, cursor))


def pending(limit: int | None, cursor: str | None) -> HttpCall:
    return HttpCall("GET", "/pending", params=page(limit, cursor))


def follow(agent: str, session_id: str, after: int) -> HttpCall:
    """A session's events after `after`, then its runs as they go (SSE)."""
    return HttpCall(
        "GET", session_path(agent, session_id) + "/stream", params={"after": str(after)}
    )


def fork(agent: str, session_id: str, at: int | None, new_id: str | None) -> HttpCall:
    body: dict[str, Any] = {}
    if at is not None:
        body["at"] = at
    if new_id is not None:
        body["sessionId"] = new_id
    return HttpCall("POST", session_path(agent, session_id) + "/fork", body)


def usage(by: str | None, agent: str | None, session_id: str | None) -> HttpCall:
    return HttpCall(
        "GET", "/usage", params=page(None, None, by=by, agent=agent, session=session_id)
    )


def checked(status: int, content: bytes) -> Any:
    """The answer's JSON, or the typed error of a refusal (with the server's message)."""
    try:
        data = json.loads(content) if content else None
    except ValueError:
        data = None
    if status >= 400:
        said = data.get("error") if isinstance(data, dict) else None
        text = said if isinstance(said, str) else content.decode(errors="replace")[:500]
        raise error_for(status, text)
    return data
