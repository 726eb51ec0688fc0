"""`POST /agents/{name}/sessions/{id}/messages` with `{"kind", "content"?, "data"?}`: an app's
custom message put in the session's history between runs (`runtime.custom`), 201 with the
logged `message:custom` event and its seq. The full profile only (v1 knows no such message:
404, as for an unknown route); 404 for an unknown or another tenant's session, 409 while a run
holds it, 400 for a body that is not one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import events as ev
from ..messages import CustomMessage
from ..runtime.custom import add_custom
from ..wire import to_dict
from .routes import session_record
from .state import state_of
from .views import ApiError, profile_of, read_json, text_field

MAX_KIND = 200


async def add_message(request: Request) -> JSONResponse:
    state = state_of(request)
    if profile_of(request) == "v1":
        raise ApiError(404, "custom messages are on the full profile only")
    record = await session_record(state, request)
    body = await read_json(request, state.settings.max_body_bytes)
    kind = text_field(body, "kind", required=True)
    assert kind is not None
    if len(kind) > MAX_KIND:
        raise ApiError(400, f"kind must be at most {MAX_KIND} characters")
    content = text_field(body, "content") or ""
    data = body.get("data")
    if data is not None and not isinstance(data, dict):
        raise ApiError(400, "data must be a JSON object")
    message = CustomMessage(kind=kind, content=content, data=data)
    seq = await add_custom(state.runtime, record.key, message)
    event = to_dict(ev.MessageCustom(message=message))
    return JSONResponse({"seq": seq, "event": event}, status_code=201)
