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
from .state import state_of
from .views import ApiError, read_json, tenant_of

MAX_EXAMPLES = 20
"""At most this many examples a group (`api_reports.RulesCheckRequest`)."""


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
