"""`POST /rules/check`: a rules file's YAML tried on the caller's tenant's stored calls
(`runtime.rules_check`; docs/rules-check.md). The body: `{"rules": "<YAML>", "agent": NAME,
"since": "7d", "examples": 3}`, every field optional (no `rules`: each agent's own rules file
as it is now). The answer is the report as `loopwright rules check --json` prints it, with the
tenant: only that tenant's calls are read. Nothing is run."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import ConfigError
from ..gate.permissions import Gate, Rules
from ..runtime.rules_check import check_rules, since_of
from .openapi_schemas import INTEGER, OBJECT, STRING, as_json, error, obj
from .state import state_of
from .views import ApiError, read_json, tenant_of

MAX_EXAMPLES = 20
_NULLABLE = {"type": ["string", "null"]}
_DECISION = obj(
    ["decision", "rule", "reason"], decision={"enum": ["allow", "ask", "deny"]}, rule=_NULLABLE
)
_WHERE = {"tenant": STRING, "agent": STRING, "session": STRING, "seq": INTEGER, "call": STRING}
_CALL = obj(
    [*_WHERE, "tool", "args", "old", "new", "human"],
    **_WHERE,
    tool=STRING,
    args=OBJECT,
    old=_DECISION,
    new=_DECISION,
    human=_NULLABLE,
)
_GROUP = obj(
    ["tool", "old", "new", "rules", "count", "examples"],
    tool=STRING,
    old=STRING,
    new=STRING,
    rules=obj(["then", "now"], then=_NULLABLE, now=_NULLABLE),
    count=INTEGER,
    examples={"type": "array", "items": _CALL},
)
_SKIPPED = obj(
    ["reason", "count", "examples"],
    reason=STRING,
    count=INTEGER,
    examples={"type": "array", "items": obj([*_WHERE, "tool", "detail"], **_WHERE)},
)
REPORT = obj(
    ["tenant", "sessions", "checked", "unchanged", "changed", "groups", "skipped"],
    tenant=STRING,
    sessions=INTEGER,
    checked=INTEGER,
    unchanged=INTEGER,
    changed={"type": "integer", "description": "Calls whose decision would change."},
    groups={"type": "array", "items": _GROUP},
    skipped={"type": "array", "items": _SKIPPED},
)
BODY = {
    "type": "object",
    "properties": {
        "rules": {"type": "string", "description": "A rules file's YAML (none: each agent's own)."},
        "agent": STRING,
        "since": {"type": "string", "description": "An ISO date or time, or 90m, 24h, 7d, 2w."},
        "examples": {"type": "integer", "minimum": 0, "maximum": MAX_EXAMPLES},
    },
}
PATHS: dict[str, Any] = {
    "/rules/check": {
        "post": {
            "summary": "Try a rules file on the tenant's stored calls (nothing is run)",
            "parameters": [],
            "requestBody": {"required": False, "content": {"application/json": {"schema": BODY}}},
            "responses": {
                "200": as_json(REPORT, "The calls that would change decision, by tool and rule."),
                "400": error("Invalid JSON or fields; a rules file that does not load (its line)."),
                "401": error(
                    "A bearer token is required (tokens are configured) and was not given."
                ),
                "403": error(
                    "The Host header names another server, or the client is not on loopback."
                ),
                "404": error("Unknown agent."),
                "413": error("Body over the limit."),
                "503": error(
                    "The server serves all the requests it may at once (see Retry-After)."
                ),
            },
        }
    }
}
"""The OpenAPI document's entry (`server.openapi`)."""


async def check(request: Request) -> JSONResponse:
    state = state_of(request)
    data = await read_json(request, state.settings.max_body_bytes, required=False)
    text, agent, since = (_string(data, name) for name in ("rules", "agent", "since"))
    examples = data.get("examples", 3)
    if isinstance(examples, bool) or not isinstance(examples, int):
        raise ApiError(400, "'examples' must be an integer")
    if not 0 <= examples <= MAX_EXAMPLES:
        raise ApiError(400, f"'examples' must be between 0 and {MAX_EXAMPLES}")
    if agent is not None:
        state.agent(agent)  # 404 for an agent the project does not have
    tenant = tenant_of(request)
    try:  # (an agent's own rules file that does not load is the operator's: a logged 500)
        gate: Gate | None = None if text is None else Rules.from_yaml(text, source="rules")
        when = None if since is None else since_of(since)
    except (ConfigError, ValueError) as exc:
        raise ApiError(400, str(exc)) from None
    report = await check_rules(
        state.runtime, gate, tenant=tenant, agent=agent, since=when, examples=examples
    )
    return JSONResponse({"tenant": tenant, **report.as_json()})


def _string(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError(400, f"'{name}' must be a string")
    return value
