"""The shapes of the API: request bodies in, JSON bodies out (the loopengine v1 shapes for the v1
routes), errors as `{"error": "<one sentence>"}`.

Plain bodies carry the logged events of a turn (token deltas are for streams only); `profile=v1`
filters them through the v1 projection of `loopwright.wire`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import events as ev
from .. import redact
from ..loop.output import Output
from ..loop.result import ANSWERED
from ..runtime import Runtime
from ..runtime.labels import label_of
from ..state.text import valid_data
from ..store import PendingRecord, StoredEvent
from ..store.log import SESSION_ID_RULE, SessionKey, valid_session_id
from ..wire import V1_STOP_REASONS, Profile, to_dict
from .guard import PRINCIPAL, TENANT
from .prefix import is_v1


class ApiError(Exception):
    """Answered as `{"error": message}` with `status` (and `headers`)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def tenant_of(request: Request) -> str:
    return str(request.scope.get(TENANT, "default"))


def principal_of(request: Request) -> str:
    """Who the request is, as a decision made through it records its decider (`guard`)."""
    return str(request.scope.get(PRINCIPAL, "loopback"))


def profile_of(request: Request) -> Profile:
    """v1 through the `/v1` prefix, else `?profile=`, else the server's `[server] profile`."""
    if is_v1(request):
        return "v1"
    default = request.app.state.loopwright.settings.profile
    if not request.scope.get("query_string"):  # (no query: no parsing)
        return "v1" if default == "v1" else "full"
    profile = request.query_params.get("profile", default)
    if profile not in ("full", "v1"):
        raise ApiError(400, "profile must be 'full' or 'v1'")
    return "v1" if profile == "v1" else "full"


def wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


async def read_json(request: Request, limit: int, *, required: bool = True) -> dict[str, Any]:
    """The request's JSON object; 413 past `limit` bytes (counted, whatever the headers say),
    400 when it is not a JSON object. An empty body is `{}` unless `required`. Its strings are
    made valid (`loopwright.state.text`: a lone surrogate becomes U+FFFD)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, f"the request body is over {limit} bytes")
    if not body.strip() and not required:
        return {}
    try:  # (bad JSON or UTF-8, an integer past Python's digit limit, nested too deep)
        data = json.loads(bytes(body))
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return valid_data(data)  # (JSON's "\ud800" is a lone surrogate)
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not valid JSON") from None


def text_field(data: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None or (required and value == ""):
        if required:
            raise ApiError(400, f"{key} is required")
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{key} must be a string")
    if required and not value.strip():
        raise ApiError(400, f"{key} is required")
    return value


def session_id_field(data: Mapping[str, Any]) -> str | None:
    session_id = text_field(data, "sessionId")
    if session_id is not None:
        check_session_id(session_id)
    return session_id


def check_session_id(session_id: str) -> str:
    """400 unless `session_id` is 1-256 characters, none of them a control character."""
    if not valid_session_id(session_id):
        raise ApiError(400, f"sessionId must be {SESSION_ID_RULE}")
    return session_id


def spliced(head: Mapping[str, Any], key: str, items: str, tail: Mapping[str, Any]) -> bytes:
    """The JSON body `{**head, key: [items], **tail}` as `JSONResponse` renders it, `items` (JSON
    values joined by commas, serialised already) put in as they are: not parsed and serialised
    again."""
    opened = _compact(head)[:-1] + ("," if head else "")
    closed = "," + _compact(tail)[1:] if tail else "}"
    return f'{opened}"{key}":[{items}]{closed}'.encode()


def _compact(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def events_json(events: Iterable[ev.Event], profile: Profile) -> list[dict[str, Any]]:
    return [d for d in (to_dict(e, profile) for e in events) if d is not None]


def stored_json(stored: Iterable[StoredEvent], profile: Profile) -> list[dict[str, Any]]:
    out = []
    for item in stored:
        data = to_dict(item.event, profile)
        if data is not None:
            out.append({"seq": item.seq, "at": item.at, "event": data})
    return out


def final_body(
    session_id: str,
    done: ev.Done,
    events: Sequence[ev.Event],
    profile: Profile,
    output: Output | None = None,
    *,
    raw: bool = False,
) -> dict[str, Any]:
    """200: the run (or turn) ended. v1: `stopReason` only when v1 knows it (`max_turns`,
    `denied`; a `max_tokens` run is `completed` there, as before), and a failed run is a 500
    `{"error": message}`. Else also `output` (the JSON value of an agent's structured output) for
    a run that ended with an answer, and the deprecated `stopDetail` (`max_tokens`, as before it
    was a stop reason). `raw` (full profile): `events` are the events themselves, for
    `state.FullBody` to serialise."""
    if profile == "v1":
        if done.stop_reason == "error":
            raise ApiError(500, redact.text(done.text) or "the run failed")
        v1: dict[str, Any] = {
            "text": redact.text(done.text),
            "sessionId": session_id,
            "events": events_json(events, profile),
        }
        if done.stop_reason in V1_STOP_REASONS:
            v1["stopReason"] = done.stop_reason
        return v1
    body: dict[str, Any] = {
        "text": redact.text(done.text),
        "sessionId": session_id,
        "events": list(events) if raw else events_json(events, profile),
        "stopReason": done.stop_reason,
    }
    if done.stop_reason == "error":
        body["error"] = body["text"]
    if done.stop_reason in ANSWERED and output is not None and done.text:
        body["output"] = redact.deep(json.loads(done.text))  # the value's own JSON text
    if done.stop_reason == "max_tokens":
        body["stopDetail"] = "max_tokens"  # (deprecated: as before max_tokens was a stopReason)
    return body


class PendingView:
    """A pending item as the API shows it, placed under its top-level agent and session (an
    item raised inside a subagent's session belongs to the session that started it)."""

    def __init__(
        self, item: PendingRecord, root_agent: str, root_session: str, label: str | None = None
    ) -> None:
        self.item = item
        self.root_agent = root_agent
        self.root_session = root_session
        self.label = label
        """The approval's tool's label (`runtime.labels`), listed on the full profile."""

    @property
    def status_url(self) -> str:
        return f"/agents/{self.root_agent}/sessions/{quote(self.root_session, safe='')}"

    def listed(self, *, typed: bool = False, labelled: bool = False) -> dict[str, Any]:
        """The listing shape (with `type` in mixed lists; `label` when `labelled` and the
        tool has one)."""
        item = self.item
        body: dict[str, Any] = {"type": item.kind} if typed else {}
        body |= {"id": item.id, "sessionId": self.root_session, "agent": self.root_agent}
        if item.kind == "approval":
            body |= {"tool": item.tool} | ({"label": self.label} if labelled and self.label else {})
            body |= {
                "args": item.args,
                "scope": scope_of(item),
                "reason": item.reason,
                "requestedAt": item.requested_at,
                "approveUrl": f"/approvals/{item.id}/approve",
                "denyUrl": f"/approvals/{item.id}/deny",
            }
        else:
            body |= {
                "question": item.reason,
                "options": item.args.get("options"),
                "requestedAt": item.requested_at,
                "answerUrl": f"/questions/{item.id}/answer",
            }
        if item.session_id != self.root_session:  # raised inside a subagent's run
            body |= {"subagent": item.agent, "subagentSessionId": item.session_id}
        return body

    def paused_body(
        self, ids: list[str], events: Sequence[ev.Event], profile: Profile
    ) -> dict[str, Any]:
        """202: the run paused on this item (the first open one; `pendingIds` has them all)."""
        listed = self.listed()
        body: dict[str, Any] = {
            "pending": True,
            "type": self.item.kind,
            "id": self.item.id,
            "sessionId": self.root_session,
        }
        keys = (
            ("tool", "args", "scope", "reason", "approveUrl", "denyUrl")
            if self.item.kind == "approval"
            else ("question", "options", "answerUrl")
        )
        body |= {key: listed[key] for key in keys}
        if profile == "v1":  # v1's 202: no stopReason, no pendingIds, no `done` (not ended)
            going = [
                e for e in events if not (isinstance(e, ev.Done) and e.stop_reason == "paused")
            ]
            return body | {"events": events_json(going, profile), "statusUrl": self.status_url}
        return body | {
            "statusUrl": self.status_url,
            "events": events_json(events, profile),
            "stopReason": "paused",
            "pendingIds": ids,
        }


def scope_of(item: PendingRecord) -> dict[str, str]:
    environment = os.environ.get("LOOPWRIGHT_ENV", "production")
    return {"tenant": item.tenant, "environment": environment, "agent": item.agent}


def paused_body(
    waiting: Sequence[PendingRecord], root: SessionKey, events: Sequence[ev.Event], profile: Profile
) -> dict[str, Any]:
    """202: the run of the top-level session `root` paused on `waiting` (its items and its
    subagents', all placed under it)."""
    ids = [item.id for item in waiting]
    return PendingView(waiting[0], root.agent, root.id).paused_body(ids, events, profile)


async def open_items(runtime: Runtime, session: SessionKey) -> list[PendingView]:
    """The open items the top-level `session` waits on (its own and its subagents'), under
    it. (The tenant's and an agent's are listed a page at a time: `resolve._page`.)"""
    return [
        PendingView(
            item, session.agent, session.id, await label_of(runtime.log, runtime.agents, item)
        )
        for item in await runtime.outstanding(session)
    ]


async def place(runtime: Runtime, item: PendingRecord) -> PendingView:
    """Where an item belongs: a subagent's item under the top-level session it was raised in."""
    root = await runtime.root_of(item)
    return PendingView(item, root.agent, root.id, await label_of(runtime.log, runtime.agents, item))
