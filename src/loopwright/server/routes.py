"""Agents and sessions: list agents and show one's configuration, send a message (plain or
streamed), and read, replay, cancel, steer, compact or resume a session — each through the
runtime. A session is named by (tenant, agent, id): the same id under another agent or tenant
is another session, and another tenant's id is an unknown one (404)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..approvals import Answer, Approval
from ..attachments import AttachmentError
from ..errors import UnknownSession
from ..messages import UserMessage
from ..runtime import LiveRun
from ..runtime.forking import lineage
from ..runtime.titles import titles
from ..state.compaction import Compaction, compactability, why_not
from ..store.log import SessionKey, SessionRecord
from ..store.usage import as_json
from ..store.usage_report import UsageQuery
from ..wire import Profile
from . import pages, sse
from .config import configuration, run_settings, summary
from .history import history_response, page_of, v1_history
from .prefix import path_id
from .settings import version
from .state import Places, State, plain_answer, run_events, state_of
from .uploads import attachments_field
from .views import (
    ApiError,
    events_json,
    open_items,
    principal_of,
    profile_of,
    read_json,
    session_id_field,
    stored_json,
    tenant_of,
    text_field,
    wants_stream,
)


async def health(request: Request) -> JSONResponse:
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
    await agent.refresh_tools(state.runtime.settings.toolsets)  # (MCP servers) listed too
    return JSONResponse(configuration(agent, state.folder(name), state.project.root))


async def post_message(request: Request) -> Response:
    """`POST /agents/{name}/messages` and `.../messages/stream` (the stream holds the run: an
    ask waits on it for a decision made anywhere, and the run goes on in the same stream)."""
    state = state_of(request)
    tenant = tenant_of(request)
    agent = state.agent(request.path_params["name"])
    profile = profile_of(request)
    data = await read_json(request, state.settings.max_body_bytes)
    text = text_field(data, "message", required=True)
    assert text is not None
    files = attachments_field(data)  # images and documents beside the text (`uploads`)
    message = UserMessage(content=text, attachments=files) if files else text
    session_id = session_id_field(data)
    try:
        settings = run_settings(agent, data.get("settings"))  # the run's own model settings
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    if session_id is not None:
        key = SessionKey(tenant, agent.name, session_id)
        await check_open(state, key, profile, principal_of(request))
    stream = request.scope["path"].endswith("/stream")
    places = state.places(tenant, run=True, stream=stream)
    try:
        live = await state.runtime.send(
            tenant, agent.name, session_id, message, hold=stream, settings=settings
        )
    except AttachmentError as exc:  # one the model cannot take
        places.close()
        raise ApiError(400, str(exc)) from None
    except BaseException:
        places.close()
        raise
    places.ran(live)
    if stream:
        return held_stream(state, live, profile, places)
    return await plain_answer(state, live, profile)


async def check_open(state: State, key: SessionKey, profile: Profile, by: str) -> None:
    """409 unless the session may take a message: it runs, or it is paused on open items. (A
    paused session whose items are all decided takes it: its batch goes on first, `send`.)
    v1 knows no such 409 (loopengine takes the message): there, the message supersedes the open
    items (`supersede`, decided `by` the caller) and runs."""
    state.runtime.live.check_idle(key)
    try:
        record = await state.runtime.session(key)
    except UnknownSession:
        return
    if record.status != "paused":
        return
    if profile == "v1":
        await supersede(state, key, by)
        return
    waiting = await state.runtime.outstanding(key)
    if waiting:
        ids = ", ".join(item.id for item in waiting)
        raise ApiError(
            409,
            f"session {key.id} is paused on pending items ({ids}): approve, deny or answer "
            "them first",
        )


SUPERSEDED = "superseded: a new message was sent instead"
"""The reason of an approval a v1 message superseded (the model reads it with the denial)."""
UNANSWERED = "(no answer: a new message was sent instead)"
"""The answer to a question a v1 message superseded."""


async def supersede(state: State, key: SessionKey, by: str) -> None:
    """Close every open item the paused session waits on (its subagents' too): an approval is
    denied (which closes its batch), a question answered `UNANSWERED` — recorded as decided
    `by` the caller, through the single authority (a decision made meanwhile elsewhere wins).
    The decided batch then goes on before the message runs (`Runtime.send`)."""
    while waiting := await state.runtime.outstanding(key):
        item = waiting[0]
        decision: Approval | Answer = (
            Answer(text=UNANSWERED, by=by)
            if item.kind == "question"
            else Approval.deny(SUPERSEDED, by=by)
        )
        await state.runtime.resolve(key.tenant, item.id, decision, resume=False)


def held_stream(state: State, live: LiveRun, profile: Profile, places: Places) -> Response:
    """A live run streamed to its caller, who holds it (see `Runtime.send`'s `hold`), in the
    stream's place of `places`."""
    held = live.held
    return sse.response(
        live.stream,
        profile,
        state.settings.keepalive,
        on_close=places.on_close(held.close if held is not None else None),
    )


async def session_record(state: State, request: Request) -> SessionRecord:
    """The session named in the path, of this tenant and this agent; 404 otherwise."""
    name = request.path_params["name"]
    state.agent(name)
    key = SessionKey(tenant_of(request), name, path_id(request))
    try:
        return await state.runtime.session(key)
    except UnknownSession:
        raise ApiError(404, f"no session '{key.id}' for agent '{name}'") from None


async def list_sessions(request: Request) -> JSONResponse:
    """One page of the tenant's sessions of this agent, most recently updated first (a
    subagent's session is shown through its parent's)."""
    state = state_of(request)
    name = request.path_params["name"]
    state.agent(name)
    tenant, limit = tenant_of(request), pages.limit_of(request)

    async def fetch(n: int, cursor: str | None) -> tuple[list[SessionRecord], str | None]:
        page = await state.runtime.sessions(tenant, name, limit=n, cursor=cursor)
        return pages.kept(page, lambda r: r.parent is None)

    records, cursor = await pages.collect(fetch, limit, pages.cursor_of(request))
    named = await titles(state.runtime, records)
    listed = [
        {
            "id": r.key.id,
            "title": title,
            "agent": r.key.agent,
            "status": r.status,
            "lastSeq": r.last_seq,
            "createdAt": r.created_at,
            "updatedAt": r.updated_at,
            "forkedFrom": lineage(r),
        }
        for r, title in zip(records, named, strict=True)
    ]
    return JSONResponse(pages.page_body("sessions", listed, cursor))


async def show_session(request: Request) -> Response:
    """The session: its status, history (all of it, or a page: `server.history`) and open
    items; v1: `{sessionId, history}` in v1's message shape, and an unknown session's history
    empty (200)."""
    state = state_of(request)
    if profile_of(request) == "v1":
        name = request.path_params["name"]
        state.agent(name)
        key = SessionKey(tenant_of(request), name, path_id(request))
        try:
            messages = (await state.runtime.open(key)).messages
        except UnknownSession:
            messages = []
        return JSONResponse({"sessionId": key.id, "history": v1_history(messages)})
    limit, end = page_of(request)
    record = await session_record(state, request)
    key = record.key
    try:
        page = await state.runtime.history(key, record.last_seq, limit=limit, end=end)
    except ValueError as exc:
        raise ApiError(400, f"cursor is past the history ({exc})") from None
    waiting = await open_items(state.runtime, key)
    spent = await state.runtime.usage_report(
        UsageQuery(tenant=key.tenant, agent=key.agent, session=key.id)
    )
    [title] = await titles(state.runtime, [record])
    head = {
        "sessionId": key.id,
        "title": title,
        "activeAgent": page.agent,  # (after a handoff, not the path's: docs/handoffs.md)
        "status": record.status,
        "lastSeq": record.last_seq,
    }
    tail = {
        "pending": [p.listed(typed=True, labelled=True) for p in waiting],
        "usage": as_json(spent.items[0]),  # with its subagents' sessions
        "forkedFrom": lineage(record),  # (None unless a fork: runtime.forking)
    }
    return history_response(head, page, tail, limit is not None)


async def session_events(request: Request) -> Response:
    """`GET .../events` (JSON, or SSE with `Accept: text/event-stream`) and `.../stream`: the
    log after a seq (`?after`, or `Last-Event-ID`): as JSON one page (`?limit`, see `pages`);
    as SSE all of it, then the session's runs as they go, across pauses, up to a `done` that
    is not a pause."""
    state = state_of(request)
    key = (await session_record(state, request)).key
    profile = profile_of(request)
    after = _sequence(request.query_params.get("after", "0"), "after")
    resume_from = request.headers.get("last-event-id")
    if resume_from is not None and resume_from.strip():
        after = _sequence(resume_from, "Last-Event-ID")
    if not (wants_stream(request) or request.url.path.endswith("/stream")):
        limit = pages.limit_of(request, pages.EVENTS, pages.MAX_EVENTS)
        stored = await state.runtime.read(key, after=after, limit=limit + 1)
        more = len(stored) > limit
        stored = stored[:limit]
        return JSONResponse(
            {
                "events": stored_json(stored, profile),
                "nextAfter": stored[-1].seq if stored else after,
                "more": more,
            }
        )
    runtime = state.runtime
    places = state.places(key.tenant, stream=True)
    return sse.response(
        lambda: runtime.events(key, after=after, follow=True),
        profile,
        state.settings.keepalive,
        on_close=places.on_close(),
    )


def _sequence(text: str, what: str) -> int:
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ApiError(400, f"{what} must be a non-negative integer (a sequence number)")
    return int(text)


async def cancel(request: Request) -> JSONResponse:
    """Cancel the session's run, here or in another process, and wait (bounded by
    `cancel_wait`) until it recorded its end: whether it ended cancelled."""
    state = state_of(request)
    key = (await session_record(state, request)).key
    cancelled = await state.runtime.cancel_run(key, wait=state.settings.cancel_wait)
    return JSONResponse({"cancelled": cancelled})


async def steer(request: Request) -> JSONResponse:
    """Steer the session's run in progress, here or in another process: 202 once the run logged
    it (waiting at most `cancel_wait` for a run elsewhere; had it just ended, the message waits
    in the session for its next run)."""
    state = state_of(request)
    record = await session_record(state, request)
    key = record.key
    data = await read_json(request, state.settings.max_body_bytes)
    message = text_field(data, "message", required=True)
    assert message is not None
    live = state.runtime.live.get(key)
    here = live is not None and not live.finished.is_set()
    if not here and record.status != "running":
        raise ApiError(409, f"session {key.id} has no run in progress: send it a message")
    await state.runtime.steer(key, message, wait=state.settings.cancel_wait)
    return JSONResponse({"queued": True}, status_code=202)


async def compact(request: Request) -> JSONResponse:
    state = state_of(request)
    key = (await session_record(state, request)).key
    profile = profile_of(request)
    agent = state.agent(key.agent)
    state.runtime.live.check_idle(key)  # busy: 409 before anything else
    session = await state.runtime.open(key)
    policy = agent.compaction or Compaction()
    nothing = compactability(session.history, policy)
    if nothing != "ok":
        reason = f"nothing to compact: {why_not(nothing, policy)}"
        return JSONResponse({"sessionId": key.id, "compacted": False, "reason": reason})
    places = state.places(key.tenant, run=True)
    try:
        live = await state.runtime.compact(key.tenant, key.agent, key.id)
    except BaseException:
        places.close()
        raise
    places.ran(live)
    done = await live.wait()
    if done is None:
        raise ApiError(500, "the compaction failed")
    return JSONResponse(
        {
            "sessionId": key.id,
            "compacted": done.stop_reason == "completed",
            "events": events_json(run_events(live), profile),
            "stopReason": done.stop_reason,
        }
    )


async def resume(request: Request) -> Response:
    """Resume a paused session whose items are all decided (normally the last decision
    resumes it; this finishes the job when that did not happen, e.g. after a restart)."""
    state = state_of(request)
    key = (await session_record(state, request)).key
    profile = profile_of(request)
    hold = wants_stream(request)
    places = state.places(key.tenant, run=True, stream=hold)
    try:
        live = await state.runtime.resume(key.tenant, key.agent, key.id, hold=hold)
    except BaseException:
        places.close()
        raise
    places.ran(live)
    if hold:
        return held_stream(state, live, profile, places)
    return await plain_answer(state, live, profile, whole_turn=True)
