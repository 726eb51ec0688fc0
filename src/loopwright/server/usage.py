"""`GET /usage`: the tenant's model usage summed by agent, session, day or model, a page of
groups at a time (`?by=agent,day`, `?agent=`, `?session=` with `agent`, `?from=`/`?to=` days,
`?limit=`, `?cursor=`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..store.usage import as_json
from ..store.usage_report import UsageQuery, groups
from . import pages
from .state import state_of
from .views import ApiError, tenant_of

_STRING = {"type": "string"}
QUERY = [
    {
        "name": "by",
        "in": "query",
        "required": False,
        "schema": {"type": "string", "pattern": "^((agent|session|day|model)(,|$))*$"},
        "description": "Group by these, comma-separated, each once (none: one total).",
    },
    {"name": "agent", "in": "query", "required": False, "schema": _STRING},
    {
        "name": "session",
        "in": "query",
        "required": False,
        "schema": _STRING,
        "description": "With `agent`: this session and its subagents' sessions.",
    },
    *(
        {
            "name": name,
            "in": "query",
            "required": False,
            "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "description": f"Only requests on or {when} this day (UTC).",
        }
        for name, when in (("from", "after"), ("to", "before"))
    ),
]
"""The OpenAPI document's query parameters of `GET /usage` (`server.openapi`)."""


async def usage(request: Request) -> JSONResponse:
    state = state_of(request)
    params = request.query_params
    by = groups(params.get("by", ""))
    agent = params.get("agent") or None
    if agent is not None:
        state.agent(agent)  # 404 for an agent the project does not have
    tenant = tenant_of(request)
    try:
        query = UsageQuery(
            tenant=tenant,
            by=by,
            agent=agent,
            session=params.get("session") or None,
            since=params.get("from") or None,
            until=params.get("to") or None,
            limit=pages.limit_of(request),
            cursor=pages.cursor_of(request),
        )
        page = await state.runtime.usage_report(query)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    return JSONResponse(
        {
            "tenant": tenant,
            "by": list(by),
            "groups": [as_json(g) for g in page.items],
            "nextCursor": pages.encode(page.cursor),
        }
    )
