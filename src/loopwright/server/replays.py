"""`POST /agents/{name}/sessions/{id}/replay`: the stored session replayed against the agent
as this server has it now (`loopwright.replays`, docs/replay.md), in memory — nothing is
written to the log. Body (optional): `{"model": "provider:model"}` for a live model instead of
the recorded replies. 200 with the report (`ok`, `changes`, ... and `text`, its rendering)
whether or not something changed; 404 for an unknown session, 400 for an unknown model."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import ConfigError
from ..models.registry import get_model
from ..runtime.replaying import replay_stored
from .routes import session_record
from .state import state_of
from .views import ApiError, read_json, text_field


async def replay(request: Request) -> JSONResponse:
    state = state_of(request)
    key = (await session_record(state, request)).key
    data = await read_json(request, state.settings.max_body_bytes, required=False)
    model = text_field(data, "model")
    if model is not None:
        try:
            get_model(model)
        except ConfigError as exc:
            raise ApiError(400, str(exc)) from None
    report = await replay_stored(state.runtime, key, agent=state.agent(key.agent), model=model)
    return JSONResponse(report.to_json() | {"text": report.render()})
