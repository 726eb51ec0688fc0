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
from ..store.durable import Owner, open_session, owner_of, resolve
from . import sse
from .routes import session_record
from .runs import LiveRun
from .state import plain_answer, start_run, state_of
from .views import (
    ApiError,
    Pending,
    open_items,
    profile_of,
    read_json,
    tenant_of,
    text_field,
    turn_events,
    wants_stream,
)

Action = Literal["approve", "deny", "answer"]
Kind = Literal["approval", "question"]

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
DURABLE_WRONG_KIND = {  # loopengine v1's words on its durable routes
    "approval": "pendingId '{0}' is a pending question, not a pending approval — use "
    "POST /pending-questions/{0}/answer",
    "question": "pendingId '{0}' is a pending approval, not a pending question — use "
    "POST /pending-approvals/{0}/resolve",
}


async def approve(request: Request) -> Response:
    return await _resolve(request, "approve")


async def deny(request: Request) -> Response:
    return await _resolve(request, "deny")


async def answer(request: Request) -> Response:
    return await _resolve(request, "answer")


async def _resolve(request: Request, action: Action) -> Response:
    state = state_of(request)
    profile = profile_of(request)
    data = await read_json(request, state.settings.max_body_bytes, required=action == "answer")
    kind: Kind = "question" if action == "answer" else "approval"
    recorded = await _record(request, kind, _decision(action, data), WRONG_KIND[kind])
    if isinstance(recorded, Response):
        return recorded
    owner, waiting = recorded
    if waiting:
        events = turn_events(state.store, owner.root_session_id, tenant_of(request))
        ids = [p.item.id for p in waiting]
        return JSONResponse(waiting[0].paused_body(ids, events, profile), status_code=202)
    live = await _resume(request, owner)
    if wants_stream(request):
        return sse.response(sse.live_frames(live, profile))
    return await plain_answer(state, live, owner.root_agent.name, profile, whole_turn=True)


async def resolve_pending(request: Request) -> Response:
    """v1's durable route: `{decision: approve|deny, editedArgs?}` → `{resolved, outstanding}`
    while items of the batch are open, else the resumed run's `{text, sessionId, stopReason}`."""
    data = await read_json(request, state_of(request).settings.max_body_bytes)
    choice, edited = data.get("decision"), data.get("editedArgs")
    if choice not in ("approve", "deny"):
        raise ApiError(400, "decision must be 'approve' or 'deny'")
    if edited is not None and not isinstance(edited, dict):
        raise ApiError(400, "editedArgs invalid — must be an object")
    by = text_field(data, "by") or "api"
    decision = (
        Approval.approve(edited, by=by)
        if choice == "approve"
        else Approval.deny(text_field(data, "reason"), by=by)
    )
    return await _durable(request, "approval", decision)


async def answer_pending(request: Request) -> Response:
    """v1's durable route for questions: `{answer: string}`."""
    data = await read_json(request, state_of(request).settings.max_body_bytes)
    text = data.get("answer")
    if not isinstance(text, str):
        raise ApiError(400, "'answer' must be a string")
    return await _durable(
        request, "question", Answer(text=text, by=text_field(data, "by") or "api")
    )


async def _durable(request: Request, kind: Kind, decision: Approval | Answer) -> Response:
    recorded = await _record(request, kind, decision, DURABLE_WRONG_KIND[kind], v1=True)
    if isinstance(recorded, Response):
        return recorded
    owner, waiting = recorded
    if waiting:
        return JSONResponse({"resolved": True, "outstanding": len(waiting)})
    live = await _resume(request, owner)
    await live.finished.wait()
    if live.done is None:
        raise ApiError(500, "the resumed run failed")
    done = live.done
    body = {"text": done.text, "sessionId": owner.root_session_id, "stopReason": done.stop_reason}
    return JSONResponse(body)


async def _record(
    request: Request, kind: Kind, decision: Approval | Answer, wrong_kind: str, *, v1: bool = False
) -> Response | tuple[Owner, list[Pending]]:
    """Record the decision (durable before any answer). An answer when there is nothing more
    to do (already resolved); else the owner and the items of the turn still open."""
    state, tenant = state_of(request), tenant_of(request)
    pending_id = request.path_params["id"]
    try:
        owner = owner_of(state.store, state.project.agents, pending_id, tenant=tenant)
    except UnknownPending:
        raise ApiError(404, NOT_FOUND[kind].format(pending_id)) from None
    except ConfigError as exc:
        raise ApiError(409, f"cannot resolve '{pending_id}' here: {exc}") from None
    if owner.item.kind != kind:
        raise ApiError(400, wrong_kind.format(pending_id))
    result = await resolve(state.store, owner.agent, pending_id, decision, tenant=tenant)
    if result.status == "invalid":
        error = result.error or "invalid decision"
        raise ApiError(400, f"editedArgs invalid — {error}" if v1 else error)
    if result.status == "already_resolved":
        if v1:
            return JSONResponse({"alreadyResolved": True})
        now = state.store.pending_item(pending_id, tenant)
        return JSONResponse(
            {
                "alreadyResolved": True,
                "id": pending_id,
                "status": now.status,
                "decidedBy": now.decided_by,
                "sessionId": owner.root_session_id,
            }
        )
    root = owner.root_agent.name
    waiting = open_items(state.store, tenant, agent=root, session_id=owner.root_session_id)
    return owner, waiting


async def _resume(request: Request, owner: Owner) -> LiveRun:
    """Nothing of the batch is open: the top-level session resumes here."""
    state, tenant = state_of(request), tenant_of(request)
    session = await open_session(
        owner.root_agent, state.store, owner.root_session_id, tenant=tenant
    )
    try:
        return await start_run(state, session, session.resume)
    except (SessionBusy, StaleWriter) as exc:
        raise ApiError(
            409, f"the decision is recorded, but the run cannot resume here: {exc}"
        ) from None


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
    items = open_items(state.store, tenant_of(request), agent=name, session_id=session_id)
    listed = [p.listed() for p in items if p.item.kind == kind]
    return JSONResponse({f"{kind}s": listed})


async def all_items(request: Request) -> JSONResponse:
    state = state_of(request)
    items = open_items(state.store, tenant_of(request))
    return JSONResponse({"items": [p.listed(typed=True) for p in items]})
