"""The HTTP API's report bodies as pydantic models, beside `api_models` (which lists them in
`MODELS`): an agent's resolved configuration (`GET /agents/{name}/config`, written by
`config.configuration`), a rules check (`POST /rules/check`, `rules_check`) and a session's
trace (`GET .../trace`, `trace`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .rules_check import MAX_EXAMPLES

Json = dict[str, Any]
Decision = Literal["allow", "ask", "deny"]


class ToolView(BaseModel):
    name: str
    description: str
    input_schema: Json = Field(description="The JSON Schema of its arguments.")
    gated: bool
    subagent: bool


class RuleView(BaseModel):
    name: str | None
    tool: str
    decision: Decision
    tenant: str | None
    environment: str | None
    agent: str | None
    when: Any = Field(description="The rule's argument conditions, as written.")


class PermissionsView(BaseModel):
    source: str | None = Field(description="The rules file, relative to the project.")
    defaultDecision: Decision | None
    rules: list[RuleView]


class SkillView(BaseModel):
    name: str
    description: str


class AgentConfig(BaseModel):
    """An agent's resolved configuration. `configError`: why the rules file's current version
    is not in force (the last good rules are), null while it is."""

    name: str
    systemPrompt: str | None
    description: str | None
    model: str | None
    maxTurns: int
    onDeny: str
    contextBudgetTokens: int | None
    settings: Json
    fallbackModels: list[str]
    skillIndexBudgetTokens: int
    tools: list[ToolView]
    permissions: PermissionsView
    skills: list[SkillView]
    subagents: list[str]
    configError: str | None


class RulesCheckRequest(BaseModel):
    """Every field optional: no `rules` tries each agent's own rules file as it is now."""

    rules: str | None = Field(None, description="A rules file's YAML (none: each agent's own).")
    agent: str | None = None
    since: str | None = Field(None, description="An ISO date or time, or 90m, 24h, 7d, 2w.")
    examples: int | None = Field(
        None, ge=0, le=MAX_EXAMPLES, description="Examples per group (default 3)."
    )


class DecidedBy(BaseModel):
    decision: Decision
    rule: str | None
    reason: str | None


class CallExample(BaseModel):
    tenant: str
    agent: str
    session: str
    seq: int
    call: str
    tool: str
    args: Json
    old: DecidedBy
    new: DecidedBy
    human: str | None = Field(description="Who decided the call then, when a human did.")


class RuleChange(BaseModel):
    then: str | None
    now: str | None


class ShiftGroup(BaseModel):
    """Calls of one tool whose decision changes the same way, by the same rules."""

    tool: str
    old: Decision
    new: Decision
    rules: RuleChange
    count: int
    examples: list[CallExample]


class SkippedCall(BaseModel):
    tenant: str
    agent: str
    session: str
    seq: int
    call: str
    tool: str
    detail: str | None


class SkippedGroup(BaseModel):
    reason: str
    count: int
    examples: list[SkippedCall]


class RulesReport(BaseModel):
    """The calls that would change decision, by tool and rule (nothing was run)."""

    tenant: str
    sessions: int
    checked: int
    unchanged: int
    changed: int = Field(description="Calls whose decision would change.")
    groups: list[ShiftGroup]
    skipped: list[SkippedGroup]


class TracedCall(BaseModel):
    id: str
    tool: str
    startedAt: str | None
    finishedAt: str | None
    durationMs: int | None = Field(ge=0)
    status: str | None
    isError: bool


class TracedStep(BaseModel):
    turn: int = Field(ge=0, description="The user input it answers.")
    step: int = Field(ge=0)
    startedAt: str | None
    finishedAt: str | None
    durationMs: int | None = Field(ge=0)
    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    cost: float | None
    model: str | None
    tools: list[TracedCall]


class TraceTotals(BaseModel):
    steps: int = Field(ge=0)
    durationMs: int = Field(ge=0)
    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    cost: float | None


class Trace(BaseModel):
    """A session's steps, timed from the log's commit times, with tokens and cost."""

    sessionId: str
    steps: list[TracedStep]
    omitted: int = Field(ge=0, description="Older steps left out (the latest 1,000 are kept).")
    totals: TraceTotals


class CustomMessageRequest(BaseModel):
    """An app's custom message for the session's history (`POST .../messages`, full profile):
    doors show it, the model sees it only through the agent's `convert` hook."""

    kind: str = Field(min_length=1, max_length=200, description="The app's type of message.")
    content: str = Field("", description="A text a door can show.")
    data: Json | None = Field(None, description="The app's payload (a JSON object).")


def _message_custom(schema: Json) -> None:  # (`api_models.replaced`: the event's component)
    schema.clear()
    schema["x-component"] = "MessageCustom"


class CustomAdded(BaseModel):
    seq: int = Field(description="The event's seq in the session's log.")
    event: Json = Field(json_schema_extra=_message_custom)
