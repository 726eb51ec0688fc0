"""Pending items: the listings, and their resolution (approve, approve with edited arguments,
deny, answer) from any client, whichever process's run waits on them — through
`Runtime.resolve`, the one authority: the first decision wins, wherever it is made.

The decision is recorded first (durable before the answer), then: items still open under the
top-level session → 202 with the next one; none → the run goes on, and the answer is the run's,
200 or 202, with every event from the start of the turn (or, with `Accept: text/event-stream`,
the run streamed). A run that was waiting on the item live (a client holds its stream, here or
in another process) goes on where it waited; a paused one resumes here; either way the answer
is the `done` of the run that really goes on (`Runtime.went_on`: a run pausing as the decision
came is resumed and waited for; one whose process died is taken over once its lease expires).
Resolving twice is a harmless 200 that says so — and, when the first decision was never acted
on (its process died before resuming the run), resumes the run and answers with it too; an
invalid edit is a 400 that leaves the item open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import events as ev
from .. import redact
from ..approvals import Answer, Approval
from ..errors import ConfigError, UnknownPending
from ..runtime import Resolved
from ..store import PendingRecord
from ..store.log import SessionKey
from ..wire import V1_STOP_REASONS, Profile
from . import pages, sse
from .prefix import is_v1
from .routes import held_stream, session_record
from .state import Places, State, ended, plain_answer, state_of
from .views import (
    ApiError,
    PendingView,
    open_items,
    paused_body,
    place,
    principal_of,
    profile_of,
    read_json,
    tenant_of,
    text_field,
    wants_stream,
)

DIED = (
    "the run of session {session} waiting on {item} stopped before it went on (its process "
    "died): the decision is recorded; the session's next message shows its calls interrupted"
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
    decision = _decision(action, data, principal_of(request))
    item = await _item(request, kind, WRONG_KIND[kind])
    hold = wants_stream(request)
    places = state.places(tenant_of(request), stream=hold)  # (a decision takes no run's place)
    try:
        recorded = await _record(request, item, decision, places, text_field(data, "by"))
        return await _answer(state, recorded, places, profile)
    finally:
        places.close()  # (what a run or a stream did not take over)


async def _answer(state: State, decided: _Recorded, places: Places, profile: Profile) -> Response:
    """The answer to a decision: see the module docstring."""
    result, before, hold = decided.result, decided.before, places.stream is not None
    if result.status == "invalid":
        raise ApiError(400, result.error or "invalid decision")
    if result.status == "already_resolved":
        now, late = result.item, result.run
        if profile == "v1":  # v1 knows no decided item: 404, as for an unknown one
            if late is not None:  # (resumed all the same: see below)
                late.detach()
            raise ApiError(404, NOT_FOUND[now.kind].format(now.id))
        if late is not None and hold:
            return held_stream(state, late, profile, places)
        said = {
            "alreadyResolved": True,
            "id": now.id,
            "status": now.status,
            "decidedBy": now.decided_by,
            "sessionId": result.root.id,
        }
        if late is None:
            return JSONResponse(said)
        # that decision was never acted on (its resumer died): the run it resumed here, now
        answer = await plain_answer(state, late, profile, whole_turn=True)
        return JSONResponse(said | json.loads(bytes(answer.body)), status_code=answer.status_code)
    if result.status == "waiting":
        events = await _events(state, result.root, before, profile, went_on=False)
        body = paused_body(result.outstanding, result.root, events, profile)
        return JSONResponse(body, status_code=202)
    run = result.run
    if run is not None and run.start_seq >= before:  # resumed here by this decision
        if hold:
            return held_stream(state, run, profile, places)
        if profile == "full":
            return await plain_answer(state, run, profile, whole_turn=True)
    if hold:  # it goes on where it waited (here or elsewhere): follow the session
        runtime, root = state.runtime, result.root
        return sse.response(
            lambda: runtime.events(root, after=before, follow=True),
            profile,
            state.settings.keepalive,
            on_close=places.on_close(),
        )
    done = await _ending(state, result, before)
    events = await _events(state, result.root, before, profile, went_on=True)
    return await ended(state, result.root, done, events, profile)


async def _events(
    state: State, root: SessionKey, before: int, profile: Profile, *, went_on: bool
) -> list[ev.Event]:
    """The events an answer to a decision carries: the whole turn's (full), or v1's: those of
    the run that `went_on`, one `session ... done` (one `actauth:decision` per call) — from the
    decision on for a run the decision resumed, from its `session` on for one that went on where
    it waited (a client held its stream: no `session` follows the decision), as v1 answers a
    decision with the turn so far."""
    if profile != "v1":
        return await state.runtime.turn(root)
    events = await state.runtime.since(root, before)
    if went_on and not any(e.type == "session" for e in events):
        turn = await state.runtime.turn(root)
        starts = [i for i, e in enumerate(turn) if e.type == "session"]
        return turn[starts[-1] :] if starts else events
    return events


async def resolve_pending(request: Request) -> Response:
    """v1's durable route: `{decision: approve|deny, editedArgs?}` → `{resolved, outstanding}`
    while items of the batch are open, else the resumed run's `{text, sessionId, stopReason}`."""
    data = await read_json(request, state_of(request).settings.max_body_bytes)
    choice, edited = data.get("decision"), data.get("editedArgs")
    if choice not in ("approve", "deny"):
        raise ApiError(400, "decision must be 'approve' or 'deny'")
    if edited is not None and not isinstance(edited, dict):
        raise ApiError(400, "editedArgs invalid — must be an object")
    by = principal_of(request)
    decision = (
        Approval.approve(edited, by=by)
        if choice == "approve"
        else Approval.deny(text_field(data, "reason"), by=by)
    )
    return await _durable(request, "approval", decision, text_field(data, "by"))


async def answer_pending(request: Request) -> Response:
    """v1's durable route for questions: `{answer: string}`."""
    data = await read_json(request, state_of(request).settings.max_body_bytes)
    text = data.get("answer")
    if not isinstance(text, str):
        raise ApiError(400, "'answer' must be a string")
    answer = Answer(text=text, by=principal_of(request))
    return await _durable(request, "question", answer, text_field(data, "by"))


async def _durable(
    request: Request, kind: Kind, decision: Approval | Answer, claimed: str | None
) -> Response:
    item = await _item(request, kind, DURABLE_WRONG_KIND[kind])
    places = state_of(request).places(tenant_of(request))
    decided = await _record(request, item, decision, places, claimed)
    result = decided.result
    if result.status == "invalid":
        raise ApiError(400, f"editedArgs invalid — {result.error or 'invalid decision'}")
    if result.status == "already_resolved" and result.run is None:
        return JSONResponse({"alreadyResolved": True})
    if result.status == "waiting":
        return JSONResponse({"resolved": True, "outstanding": len(result.outstanding)})
    done = await _ending(state_of(request), result, decided.before)
    body: dict[str, Any] = {"text": redact.text(done.text), "sessionId": result.root.id}
    if result.status == "already_resolved":  # (never acted on: resumed now)
        body["alreadyResolved"] = True
    if profile_of(request) == "full" or done.stop_reason in V1_STOP_REASONS:
        body["stopReason"] = done.stop_reason
    return JSONResponse(body)


async def _item(request: Request, kind: Kind, wrong_kind: str) -> PendingRecord:
    """The item named in the path, of this tenant and of this kind (404, 400 otherwise)."""
    state, pending_id = state_of(request), request.path_params["id"]
    try:
        item = await state.runtime.item(tenant_of(request), pending_id)
    except UnknownPending:
        raise ApiError(404, NOT_FOUND[kind].format(pending_id)) from None
    if item.kind != kind:
        raise ApiError(400, wrong_kind.format(pending_id))
    return item


@dataclass(frozen=True, slots=True)
class _Recorded:
    result: Resolved
    before: int
    """The top-level session's last seq before the decision: where what follows it starts."""


async def _record(
    request: Request,
    item: PendingRecord,
    decision: Approval | Answer,
    places: Places,
    claimed: str | None,
) -> _Recorded:
    """Record the decision (durable before any answer), made by the request's principal
    (`claimed`: the body's `by`, a note); a run it resumes here counts in the tenant's runs
    (`Places.counted`), and is held by the caller when `places` has a stream's."""
    state, tenant = state_of(request), tenant_of(request)
    hold = places.stream is not None
    try:
        result = await state.runtime.resolve(tenant, item.id, decision, hold=hold, claimed=claimed)
    except ConfigError as exc:
        raise ApiError(409, f"cannot resolve '{item.id}' here: {exc}") from None
    run, before = result.run, result.before
    places.counted(run if run is not None and run.start_seq >= before else None)
    return _Recorded(result, before)


async def _ending(state: State, result: Resolved, before: int) -> ev.Done:
    """The `done` of the run that goes on after the decision, wherever it runs (taken over
    here if its process died: `Runtime.went_on`); 409 when nothing could go on."""
    done = await state.runtime.went_on(result.root, before)
    if done is None:
        raise ApiError(409, DIED.format(session=result.root.id, item=result.item.id))
    return done


def _decision(action: Action, data: dict[str, Any], by: str) -> Approval | Answer:
    text_field(data, "by")  # (a string, if given: it is a note, `_record`)
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
    """`/agents/{name}/approvals|questions` (one page: `?limit`, `?cursor`, see `pages`) and
    `/agents/{name}/sessions/{id}/...` (what the session waits on: its open batch and its
    subagents', all of it)."""
    state = state_of(request)
    name = request.path_params["name"]
    state.agent(name)
    kind: Kind = "approval" if request.url.path.endswith("/approvals") else "question"
    if "id" in request.path_params:
        key = (await session_record(state, request)).key
        items = await open_items(state.runtime, key)
        full = not is_v1(request)
        shown = [p.listed(labelled=full) for p in items if p.item.kind == kind]
        return JSONResponse({f"{kind}s": shown})
    listed, cursor = await _page(request, name, kind)
    shown = [p.listed(labelled=not is_v1(request)) for p in listed]
    return JSONResponse(pages.page_body(f"{kind}s", shown, cursor))


async def all_items(request: Request) -> JSONResponse:
    """`/pending`: one page of every open item of the tenant."""
    listed, cursor = await _page(request, None, None)
    shown = [p.listed(typed=True, labelled=not is_v1(request)) for p in listed]
    return JSONResponse(pages.page_body("items", shown, cursor))


async def _page(
    request: Request, agent: str | None, kind: Kind | None
) -> tuple[list[PendingView], str | None]:
    """One page of the tenant's open items, in the order they were requested: those under the
    top-level agent `agent` (a subagent's items are its parent's), of `kind` (or all)."""
    state, tenant = state_of(request), tenant_of(request)
    limit, cursor = pages.limit_of(request), pages.cursor_of(request)

    async def fetch(n: int, cursor: str | None) -> tuple[list[PendingView], str | None]:
        page = await state.runtime.pending_page(tenant, limit=n, cursor=cursor)
        placed = [await place(state.runtime, item) for item in page.items]
        return [
            p
            for p in placed
            if (agent is None or p.root_agent == agent) and (kind is None or p.item.kind == kind)
        ], page.cursor

    return await pages.collect(fetch, limit, cursor)
