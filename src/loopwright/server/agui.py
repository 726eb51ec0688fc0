"""`POST /agents/{name}/agui`: an agent as an AG-UI backend (CopilotKit and other AG-UI front
ends). The body is AG-UI's `RunAgentInput` (`threadId` is the session id, its last message the
user's new message); the answer is the run as AG-UI events over SSE, encoded by the official
encoder (`agui_events` translates them). A thin adapter over the runtime, like every door.

Approvals and questions follow AG-UI's interrupt convention: the run does not wait for them
(an asking call pauses it durably), it ends with `RUN_FINISHED` whose outcome is `interrupt`,
one interrupt per open item; the next `RunAgentInput` on the thread answers them in `resume`
(`[{interruptId, status, payload}]`), and the run goes on in that request's stream. The same
items can be decided through the approval routes meanwhile (the first decision wins).

Needs the `agui` extra (`ag-ui-protocol`): without it the route answers 501 naming it, and the
rest of the server does not notice (the module is imported only when the route is used)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import events as ev
from .. import redact
from ..approvals import DEFER, ApproverResult
from ..approvals import Request as Ask
from ..errors import UnknownSession, describe
from ..runtime import LiveRun
from ..runtime.follow import batches
from ..store.log import SessionKey
from .openapi_schemas import NAME, RUN_RESPONSES, Schema, error
from .routes import check_open
from .sse import KEEPALIVE, EventStream
from .state import State, state_of
from .views import ApiError, check_session_id, principal_of, read_json, tenant_of

if TYPE_CHECKING:
    from .agui_events import RunAgentInput, Translation

EXTRA = "AG-UI needs the agui extra: pip install 'loopwright[agui]'"


def pause(request: Ask) -> ApproverResult:
    """The approver of AG-UI runs: nobody answers mid-run, every ask pauses the run durably
    (AG-UI's interrupt: the front end answers in the next run's `resume`)."""
    return DEFER


async def run(request: Request) -> Response:
    state = state_of(request)
    tenant = tenant_of(request)
    agent = state.agent(request.path_params["name"])  # (404 before anything else)
    data = await read_json(request, state.settings.max_body_bytes)
    try:
        from . import agui_events as agui
    except ImportError:
        raise ApiError(501, EXTRA) from None
    try:
        given = agui.RunAgentInput.model_validate(data)
    except ValidationError as exc:
        details = exc.errors(include_url=False, include_context=False, include_input=False)
        body = {"error": "the body is not an AG-UI RunAgentInput", "details": details}
        return JSONResponse(body, status_code=422)
    key = SessionKey(tenant, agent.name, check_session_id(given.thread_id))
    places = state.places(tenant, run=True, stream=True)
    try:
        live, before = await start(state, key, given, principal_of(request))
    except BaseException:
        places.close()
        raise
    places.ran(live)
    translation = agui.Translation(key.id, given.run_id)
    encoder = agui.EventEncoder()
    frames = stream(state, key, live, before, translation)

    async def encoded() -> AsyncIterator[str]:  # (a comment line through a long silence)
        async for batch in batches(frames, state.settings.keepalive):
            if batch is None:
                yield KEEPALIVE
            else:
                yield "".join(encoder.encode(e) for events in batch for e in events)

    return EventStream(encoded(), places.on_close())


async def start(
    state: State, key: SessionKey, given: RunAgentInput, by: str
) -> tuple[LiveRun | None, int | None]:
    """The run the request starts: its live run here, or (None, the seq to follow the session
    from) when a decision resumed it elsewhere, or (None, None) when items are still open."""
    from . import agui_events as agui

    if given.resume:
        return await decide(state, key, given, by)
    text = agui.user_text(given)
    if text is None:
        raise ApiError(
            422,
            "the last message must be the user's new message (or `resume` answers the "
            "interrupts of the thread's last run)",
        )
    await check_open(state, key, "full", by)  # (409: paused on open items, answer them)
    live = await state.runtime.send(key.tenant, key.agent, key.id, text, approver=pause)
    return live, None


async def decide(
    state: State, key: SessionKey, given: RunAgentInput, by: str
) -> tuple[LiveRun | None, int | None]:
    """Record the decisions of `resume` (each through the single authority, as the approval
    routes do); the last one resumes the run when nothing is left open."""
    from . import agui_events as agui

    assert given.resume
    try:
        open_items = {item.id: item for item in await state.runtime.outstanding(key)}
    except UnknownSession:
        open_items = {}
    decisions = []
    for entry in given.resume:
        item = open_items.get(entry.interrupt_id)
        if item is None:
            raise ApiError(404, f"no open interrupt '{entry.interrupt_id}' on this thread")
        made = agui.decision(entry, item, by)
        if isinstance(made, str):
            raise ApiError(422, made)
        decisions.append((item.id, made))
    live: LiveRun | None = None
    before: int | None = None
    for n, (item_id, made) in enumerate(decisions):
        last = n == len(decisions) - 1
        done = await state.runtime.resolve(key.tenant, item_id, made, approver=pause, resume=last)
        if done.status == "invalid":
            raise ApiError(422, done.error or f"the decision on {item_id} was refused")
        if last and done.status in ("resumed", "already_resolved"):
            live, before = done.run, (None if done.run is not None else done.before)
    return live, before


async def stream(
    state: State,
    key: SessionKey,
    live: LiveRun | None,
    before: int | None,
    translation: Translation,
) -> AsyncIterator[list[Any]]:
    """The AG-UI events of the run, in batches: this process's run live (its token deltas
    included), a run elsewhere through the log up to its `done`, or no run at all."""
    yield translation.started()
    done: ev.Done | None = None
    failure: str | None = None
    if live is not None:
        async for _, event in live.subscribe(live.start_seq):
            if batch := translation.event(event):
                yield batch
        done = live.done
        if done is None:
            failure = redact.text(describe(live.failure or RuntimeError("no answer")))
    elif before is not None:
        async for _, event in state.runtime.events(key, after=before, follow=True):
            if batch := translation.event(event):
                yield batch
            if isinstance(event, ev.Done):
                done = event
                break
    else:  # decisions recorded, items still open: the same interrupt, less what was answered
        done = ev.Done(text="", stop_reason="paused")
    pending = await state.runtime.outstanding(key) if done is not None else []
    yield translation.ended(done, pending, failure)


PATHS: dict[str, Schema] = {
    "/agents/{name}/agui": {
        "post": {
            "summary": "Run the agent for an AG-UI front end",
            "description": "The body is AG-UI's RunAgentInput (`threadId` is the session id, "
            "the last message the user's new message, or `resume` answers the interrupts of "
            "the thread's last run); the answer streams AG-UI events (SSE, `data: <event>`). "
            "An approval or question ends the run with RUN_FINISHED's interrupt outcome. "
            "Needs the `agui` extra (501 without it).",
            "parameters": [NAME],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "description": "AG-UI's RunAgentInput (ag_ui.core.RunAgentInput)",
                            "required": ["threadId", "runId", "messages"],
                            "properties": {
                                "threadId": {"type": "string"},
                                "runId": {"type": "string"},
                                "messages": {"type": "array", "items": {"type": "object"}},
                                "resume": {"type": "array", "items": {"type": "object"}},
                            },
                        }
                    }
                },
            },
            "responses": {
                **{k: v for k, v in RUN_RESPONSES.items() if k in ("409", "429")},
                "200": {
                    "description": "AG-UI events, one `data:` frame each.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                "400": error("Invalid JSON, or a threadId that is no session id."),
                "401": error("A bearer token is required (tokens are configured)."),
                "403": error("The Host header names another server, or not on loopback."),
                "404": error("Unknown agent, or a resume entry no open interrupt has."),
                "413": error("Body over the limit."),
                "422": error("Not a RunAgentInput (`details`: pydantic's errors), or a payload."),
                "501": error("The agui extra is not installed."),
                "503": error("The server serves all the requests it may at once."),
            },
        }
    }
}
"""The route's OpenAPI operation (its body is AG-UI's own schema, not one of ours)."""
