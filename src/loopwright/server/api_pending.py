"""The HTTP API's pending item body (`GET /pending`, `/agents/{name}/approvals|questions`, a
session's open items), beside `api_models`, which lists it in its pages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


def _nullable(description: str) -> Any:  # (`api_models.nullable`, which imports this module)
    return Field(None, description=description, json_schema_extra={"x-nullable": True})


class PendingItem(BaseModel):
    """A pending approval (tool, label, args, scope, reason, approveUrl, denyUrl) or question
    (question, options, answerUrl); `type` in mixed lists; `subagent` and
    `subagentSessionId` when a subagent's run raised it."""

    type: Literal["approval", "question"] | None = None
    id: str
    sessionId: str
    agent: str
    requestedAt: str
    tool: str | None = None
    label: str | None = Field(
        None, description="An approval's tool's human name (left out when the tool has none)."
    )
    args: dict[str, Any] | None = None
    scope: dict[str, str] | None = None
    reason: str | None = _nullable("An approval's reason (null when its rule gave none).")
    approveUrl: str | None = None
    denyUrl: str | None = None
    question: str | None = None
    options: list[str] | None = _nullable("A question's choices (null: free text).")
    answerUrl: str | None = None
    subagent: str | None = None
    subagentSessionId: str | None = None
