"""Pending items: the listings, and their resolution (approve, approve with edited arguments,
deny, answer) from any client, whichever process paused the run.

A resolution is recorded first (durable before the answer), then: items of the batch still open
→ 202 with the next one; none → the top-level session resumes here and the answer is the
run's, 200 or 202, with every event from the start of the turn (or, with
`Accept: text/event-stream`, the resumed run streamed). Resolving twice is a harmless 200 that
says so; an invalid edit is a 400 that leaves the item open.
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..approvals import Answer, Approval
from ..errors import ConfigError, SessionBusy, UnknownPending
from ..store import StaleWriter
from ..store.durable import open_session, owner_of, resolve
from . import sse
from .routes import session_record
from .state import plain_answer, start_run, state_of
from .views import (
    ApiError,
    open_items,
    profile_of,
    read_json,
    tenant_of,
    text_field,
    turn_events,
    wants_stream,
)

Action = Literal["approve", "deny", "answer"]

NOT_FOUND = {
    "approval": "No pending approval '{}' (already decided, timed out, or never existed).",
    "question": "No pending question '{}' (already answered, timed out, or never existed).",
}
WRONG_KIND = {
    "approval": "'{0}' is a pending question, not an approval: answer it with "
    "POST /questions/{0}/answer",
    "question": "'{0}' is a pending approval, not a question: use POST /approvals/{0}/approve "
    "or /approvals/{0}/deny",
}


async def approve(request: Request) -> Response:
    return await _resolve(request, "approve")


async def deny(request: Request) -> Response:
    return await _resolve(request, "deny")


async def answer(request: Request) -> Response:
    return await _resolve(request, "answer")


async def _resolve(request: Request, action: Action) -> Response:
    state = state_of(request)
    tenant = tenant_of(request)
    profile = profile_of(request)
    pending_id = request.path_params["id"]
    kind = "question" if action == "answer" else "approval"
    data = await read_json(request, state.settings.max_body_bytes, required=action == "answer")
    decision = _decision(action, data)
    try:
        owner = owner_of(state.store, state.project.agents, pending_id, tenant=tenant)
    except UnknownPending:
        raise ApiError(404, NOT_FOUND[kind].format(pending_id)) from None
    except ConfigError as exc:
        raise ApiError(409, f"cannot resolve '{pending_id}' here: {exc}") from None
    if owner.item.kind != kind:
        raise ApiError(400, WRONG_KIND[kind].format(pending_id))
    result = await resolve(state.store, owner.agent, pending_id, decision, tenant=tenant)
    if result.status == "invalid":
        raise ApiError(400, result.error or "invalid decision")
    root, session_id = owner.root_agent, owner.root_session_id
    if result.status == "already_resolved":
        now = state.store.pending_item(pending_id, tenant)
        return JSONResponse(
            {
                "alreadyResolved": True,
                "id": pending_id,
                "status": now.status,
                "decidedBy": now.decided_by,
                "sessionId": session_id,
            }
        )
    waiting = open_items(
        state.store, state.project.agents, tenant, agent=root.name, session_id=session_id
    )
    if waiting:
        events = turn_events(state.store, session_id, tenant)
        ids = [p.item.id for p in waiting]
        return JSONResponse(waiting[0].paused_body(ids, events, profile), status_code=202)
    session = await open_session(root, state.store, session_id, tenant=tenant)
    try:
        live = await start_run(state, session, session.resume)
    except (SessionBusy, StaleWriter) as exc:
        raise ApiError(
            409, f"the decision is recorded, but the run cannot resume here: {exc}"
        ) from None
    if wants_stream(request):
        return sse.response(sse.live_frames(live, profile))
    return await plain_answer(state, live, root.name, profile, whole_turn=True)


def _decision(action: Action, data: dict[str, Any]) -> Approval | Answer:
    by = text_field(data, "by") or "api"
    if action == "answer":
        text = data.get("answer")
        if text is None:
            raise ApiError(400, "answer is required")
        if not isinstance(text, str):
            raise ApiError(400, "answer must be a string")
        return Answer(text=text, by=by)
    if action == "deny":
        return Approval.deny(text_field(data, "reason"), by=by)
    args = data.get("args", data.get("editedArgs"))
    if args is not None and not isinstance(args, dict):
        raise ApiError(400, "args must be a JSON object (the call's edited arguments)")
    return Approval.approve(args, by=by)


async def agent_items(request: Request) -> JSONResponse:
    """`/agents/{name}/approvals|questions` and `/agents/{name}/sessions/{id}/...`."""
    state = state_of(request)
    name = request.path_params["name"]
    state.agent(name)
    session_id = None
    if "id" in request.path_params:
        session_id = session_record(state, request).id
    kind = "approval" if request.url.path.endswith("/approvals") else "question"
    items = open_items(
        state.store, state.project.agents, tenant_of(request), agent=name, session_id=session_id
    )
    listed = [p.listed() for p in items if p.item.kind == kind]
    return JSONResponse({f"{kind}s": listed})


async def all_items(request: Request) -> JSONResponse:
    state = state_of(request)
    items = open_items(state.store, state.project.agents, tenant_of(request))
    return JSONResponse({"items": [p.listed(typed=True) for p in items]})
