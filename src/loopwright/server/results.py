"""`GET /agents/{name}/sessions/{id}/results/{ref}`: the whole text of a large tool result the
session stored (docs/large-results.md), or a range of it (`?offset=`, `?length=`, in characters),
as `text/plain`. The session is the tenant's own (404 otherwise), and so is the reference: one
that no `tool:output` of this session names is a 404 like an unknown one. The response says the
whole result's length in `X-Result-Length`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .openapi_schemas import ID, NAME, STRING, Schema, error
from .routes import session_record
from .state import state_of
from .views import ApiError


async def show(request: Request) -> Response:
    state = state_of(request)
    key = (await session_record(state, request)).key
    ref = request.path_params["ref"]
    offset, length = _number(request, "offset"), _number(request, "length")
    text = await state.runtime.result(key, ref)
    if text is None:
        raise ApiError(404, f"no stored result '{ref}' in session '{key.id}'")
    end = len(text) if length is None else (offset or 0) + length
    return Response(
        text[offset or 0 : end],
        media_type="text/plain; charset=utf-8",
        headers={"X-Result-Length": str(len(text))},
    )


def _number(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        raise ApiError(400, f"{name} must be a whole number ≥ 0")
    return int(raw)


def _query(name: str, description: str) -> Schema:
    schema = {"type": "integer", "minimum": 0}
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


TEXT: Schema = {
    "description": "The result's text (or the range); `X-Result-Length`: the whole one's length.",
    "content": {"text/plain": {"schema": STRING}},
    "headers": {"X-Result-Length": {"schema": {"type": "integer"}}},
}
OPERATION: tuple[str, dict[str, Schema], *tuple[Schema, ...]] = (
    "A large tool result the session stored, whole or a range (docs/large-results.md)",
    {"200": TEXT, "400": error("offset or length is not a whole number ≥ 0.")},
    NAME,
    ID,
    {
        "name": "ref",
        "in": "path",
        "required": True,
        "schema": STRING,
        "description": "The reference its preview gives: `result:` and a SHA-256.",
    },
    _query("offset", "The first character (default 0)."),
    _query("length", "How many characters (default: to the end)."),
)
"""`GET …/results/{ref}` in the OpenAPI document (`openapi._op`'s arguments)."""
