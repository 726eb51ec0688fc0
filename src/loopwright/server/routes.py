"""Agents and sessions: list agents and show one's configuration, send a message (plain or
streamed), and read, replay, cancel, steer, compact or resume a session. Every session is
looked up within the caller's tenant: another tenant's id is unknown (404)."""

from __future__ import annotations

import asyncio
import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..compaction import Compaction, compactability, why_not
from ..errors import SessionBusy, UnknownSession
from ..store import SessionRecord
from ..store.durable import open_session
from ..wire import messages_to_json
from . import sse
from .config import configuration, summary
from .state import State, plain_answer, start_run, state_of
from .views import (
    ApiError,
    events_json,
    open_items,
    profile_of,
    read_json,
    session_id_field,
    stored_json,
    tenant_of,
    text_field,
    wants_stream,
)


async def health(request: Request) -> JSONResponse:
    from . import version

    return JSONResponse({"ok": True, "version": version()})


async def list_agents(request: Request) -> JSONResponse:
    state = state_of(request)
    root = state.project.root
    agents = [summary(a, root) for _, a in sorted(state.project.agents.items())]
    return JSONResponse({"agents": agents})


async def agent_config(request: Request) -> JSONResponse:
    state = state_of(request)
    name = request.path_params["name"]
    agent = state.agent(name)
    return JSONResponse(configuration(agent, state.folder(name), state.project.root))


async def post_message(request: Request) -> Response:
    """`POST /agents/{name}/messages` and `.../messages/stream`."""
    state = state_of(request)
    tenant = tenant_of(request)
    agent = state.agent(request.path_params["name"])
    profile = profile_of(request)
    data = await read_json(request, state.settings.max_body_bytes)
    message = text_field(data, "message", required=True)
    assert message is not None
    session_id = session_id_field(data)
    if session_id is not None:
        state.runs.check_idle(tenant, session_id)
        try:
            record = state.store.session(session_id, tenant)
        except UnknownSession:
            record = None
        if record is not None and record.agent != agent.name:
            raise ApiError(
                409, f"session {session_id} belongs to agent '{record.agent}', not '{agent.name}'"
            )
        waiting = open_items(state.store, tenant, session_id=session_id)
        if waiting:
            ids = ", ".join(p.item.id for p in waiting)
            raise ApiError(
                409,
                f"session {session_id} is paused on pending items ({ids}): approve, deny or "
                "answer them first",
            )
    session = await open_session(agent, state.store, session_id, tenant=tenant)
    if session.history.checkpoint is not None:
        raise ApiError(
            409,
            f"session {session.id} is paused and its items are resolved: resume it first "
            f"(POST /agents/{agent.name}/sessions/{session.id}/resume)",
        )
    live = await start_run(state, session, lambda: session.run(message))
    if request.url.path.endswith("/stream"):
        return sse.response(sse.live_frames(live, profile))
    return await plain_answer(state, live, agent.name, profile)


def session_record(state: State, request: Request) -> SessionRecord:
    """The session named in the path, of this tenant and this agent; 404 otherwise."""
    name = request.path_params["name"]
    state.agent(name)
    session_id = request.path_params["id"]
    try:
        record = state.store.session(session_id, tenant_of(request))
    except UnknownSession:
        record = None
    if record is None or record.agent != name:
        raise ApiError(404, f"no session '{session_id}' for agent '{name}'")
    return record


async def list_sessions(request: Request) -> JSONResponse:
    state = state_of(request)
    name = request.path_params["name"]
    state.agent(name)
    records = state.store.sessions(tenant_of(request), agent=name)
    return JSONResponse(
        {
            "sessions": [
                {
                    "id": r.id,
                    "agent": r.agent,
                    "status": r.status,
                    "lastSeq": r.last_seq,
                    "createdAt": r.created_at,
                    "updatedAt": r.updated_at,
                }
                for r in records
                if "/" not in r.id  # a subagent's session is shown through its parent's
            ]
        }
    )


async def show_session(request: Request) -> JSONResponse:
    state = state_of(request)
    record = session_record(state, request)
    tenant = tenant_of(request)
    agent = state.agent(record.agent)
    session = await open_session(agent, state.store, record.id, tenant=tenant)
    waiting = open_items(state.store, tenant, agent=record.agent, session_id=record.id)
    return JSONResponse(
        {
            "sessionId": record.id,
            "status": record.status,
            "lastSeq": record.last_seq,
            "history": json.loads(messages_to_json(session.messages)),
            "pending": [p.listed(typed=True) for p in waiting],
        }
    )


async def session_events(request: Request) -> Response:
    """`GET .../events` (JSON, or SSE with `Accept: text/event-stream`) and `.../stream`."""
    state = state_of(request)
    record = session_record(state, request)
    tenant = tenant_of(request)
    profile = profile_of(request)
    after = _sequence(request.query_params.get("after", "0"), "after")
    resume_from = request.headers.get("last-event-id")
    if resume_from is not None and resume_from.strip():
        after = _sequence(resume_from, "Last-Event-ID")
    if not (wants_stream(request) or request.url.path.endswith("/stream")):
        stored = state.store.load(record.id, tenant, after=after)
        return JSONResponse({"events": stored_json(stored, profile)})
    live = state.runs.get(tenant, record.id)
    if live is not None:
        try:
            await live.started()
        except Exception:
            live = None
    return sse.response(sse.replay_frames(state.store, tenant, record.id, after, live, profile))


def _sequence(text: str, what: str) -> int:
    text = text.strip()
    if not text.isdigit() or len(text) > 18:
        raise ApiError(400, f"{what} must be a non-negative integer (a sequence number)")
    return int(text)


async def cancel(request: Request) -> JSONResponse:
    """Cancel the session's live run here and wait (bounded) until it recorded its end."""
    state = state_of(request)
    record = session_record(state, request)
    live = state.runs.get(tenant_of(request), record.id)
    if live is None:
        return JSONResponse({"cancelled": False})
    live.session.cancel()
    try:
        await asyncio.wait_for(live.finished.wait(), state.settings.cancel_wait)
    except TimeoutError:
        return JSONResponse({"cancelled": True})
    stopped = live.done is not None and live.done.stop_reason == "aborted"
    return JSONResponse({"cancelled": stopped})


async def steer(request: Request) -> JSONResponse:
    state = state_of(request)
    record = session_record(state, request)
    data = await read_json(request, state.settings.max_body_bytes)
    message = text_field(data, "message", required=True)
    assert message is not None
    live = state.runs.get(tenant_of(request), record.id)
    if live is None or live.finished.is_set():
        raise ApiError(409, f"session {record.id} has no run in progress: send it a message")
    live.session.steer(message)
    return JSONResponse({"queued": True}, status_code=202)


async def compact(request: Request) -> JSONResponse:
    state = state_of(request)
    record = session_record(state, request)
    profile = profile_of(request)
    agent = state.agent(record.agent)
    state.runs.check_idle(tenant_of(request), record.id)  # busy: 409 before anything else
    session = await open_session(agent, state.store, record.id, tenant=tenant_of(request))
    keep_last = (agent.compaction or Compaction()).keep_last
    nothing = compactability(session.history, keep_last)
    if nothing != "ok":
        reason = f"nothing to compact: {why_not(nothing, keep_last)}"
        return JSONResponse({"sessionId": record.id, "compacted": False, "reason": reason})
    live = await start_run(state, session, session.compact)
    await live.finished.wait()
    if live.done is None:
        raise ApiError(500, "the compaction failed")
    return JSONResponse(
        {
            "sessionId": record.id,
            "compacted": live.done.stop_reason == "completed",
            "events": events_json(live.stored_events(), profile),
            "stopReason": live.done.stop_reason,
        }
    )


async def resume(request: Request) -> Response:
    """Resume a paused session whose items are all resolved (normally resolving the last item
    resumes it; this finishes the job when that did not happen, e.g. after a restart)."""
    state = state_of(request)
    record = session_record(state, request)
    tenant = tenant_of(request)
    profile = profile_of(request)
    agent = state.agent(record.agent)
    session = await open_session(agent, state.store, record.id, tenant=tenant)
    if session.history.checkpoint is None:
        raise ApiError(409, f"session {record.id} has no paused run to resume")
    try:
        live = await start_run(state, session, session.resume)
    except SessionBusy as exc:
        raise ApiError(409, str(exc).replace("resume()", "resume")) from None
    if wants_stream(request):
        return sse.response(sse.live_frames(live, profile))
    return await plain_answer(state, live, agent.name, profile, whole_turn=True)
