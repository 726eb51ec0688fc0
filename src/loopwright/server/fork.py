"""`POST /agents/{name}/sessions/{id}/fork` with `{"at": seq, "sessionId": new id}` (both
optional): a new session whose history is the session's up to `at` (`runtime.forking`), 201
with its id and lineage. 404 for an unknown or foreign session; 422 for a seq out of range, 409
for a new id in use, 400 for a body that is not one."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..runtime.forking import CannotFork, fork, lineage
from ..store.log import SessionRecord
from .routes import session_record
from .state import state_of
from .views import ApiError, read_json, session_id_field


async def fork_session(request: Request) -> JSONResponse:
    state = state_of(request)
    source = await session_record(state, request)
    data = await read_json(request, state.settings.max_body_bytes, required=False)
    at = data.get("at")
    if at is not None and (isinstance(at, bool) or not isinstance(at, int)):
        raise ApiError(400, "at must be an integer: a seq of the session")
    new_id = session_id_field(data)
    try:
        key = await fork(state.runtime, source.key, at=at, new_id=new_id)
    except CannotFork as exc:
        raise ApiError(409 if exc.why == "exists" else 422, str(exc)) from None
    return JSONResponse(forked(await state.runtime.session(key)), status_code=201)


def forked(record: SessionRecord) -> dict[str, Any]:
    """A fork as the route answers it (its lineage as the session's body shows it)."""
    return {
        "sessionId": record.key.id,
        "agent": record.key.agent,
        "status": record.status,
        "lastSeq": record.last_seq,
        "forkedFrom": lineage(record),
    }
