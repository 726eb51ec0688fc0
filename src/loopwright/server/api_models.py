"""The HTTP API's bodies as pydantic models: what each route reads (`...Request`) and answers.
The OpenAPI document (`openapi`) is generated from them; the routes write their bodies by hand
(`views`, `routes`, `resolve`), and tests/test_openapi_responses.py validates what a real server
answers against the generated schemas, so a model that drifts from its route fails there.

Field names are the wire's (camelCase). A field the server leaves out when it has no value is
`None` by default here (in the schema: optional, never null); one it sends as null is required
and `X | None`, or, when it is also left out at times, `nullable()`; a body may carry keys its model does
not name, and a client ignores them (the v1 profile's bodies are the full ones with fewer keys)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from . import api_reports as custom
from .api_pending import PendingItem
from .api_reports import AgentConfig, RulesCheckRequest, RulesReport, Trace
from .uploads import SCHEMA as ATTACHMENTS

Json = dict[str, Any]


class Body(BaseModel):
    """A JSON body (keys it does not name are ignored, as clients should)."""


def replaced(schema: Json) -> Any:
    """What a field's generated schema is replaced by. `{"x-component": name}` stands for a
    reference to a component the document defines beside the models (`openapi_schemas.linked`
    makes it one: pydantic resolves every `$ref` it is given)."""

    def replace(generated: Json) -> None:
        generated.clear()
        generated.update(schema)

    return replace


def nullable(description: str | None = None) -> Any:
    """An optional field the server may also send as null (`openapi_schemas.components` keeps
    its null; other optional fields lose it)."""
    return Field(None, description=description, json_schema_extra={"x-nullable": True})


def events(description: str, *, required: bool = True) -> Any:
    extra = replaced({"x-component": "Events", "description": description})
    return Field(json_schema_extra=extra) if required else Field(None, json_schema_extra=extra)


# requests


class MessageRequest(Body):
    """Send a message (a new session, or `sessionId`'s)."""

    message: str = Field(min_length=1)
    sessionId: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        pattern="^[^\\x00-\\x1f\\x7f-\\x9f]*$",
        description="Any text but control characters, kept as given (percent-encode it in "
        "paths). Default: a new session.",
    )
    attachments: list[Json] | None = Field(None, json_schema_extra=replaced(ATTACHMENTS))
    settings: Json | None = Field(
        None,
        description="Model settings for this run, laid over the agent's: agent.yaml's "
        "`settings:` keys (temperature, top_p, stop, max_output_tokens, reasoning, metadata, "
        "extra). Invalid, or refused by the agent's model: 400 naming the setting.",
    )


class SteerRequest(Body):
    """A message for the run in progress."""

    message: str = Field(min_length=1)


class ReplayRequest(Body):
    """Replay with a live model instead of the recorded replies."""

    model: str | None = Field(None, description="`provider:model`.")


class ForkRequest(Body):
    """Where to fork, and the new session's id."""

    at: int | None = Field(None, description="The last seq copied (default: the session's last).")
    sessionId: str | None = Field(None, description="The new id (default: a fresh one).")


class ApproveRequest(Body):
    """Approve, optionally replacing the call's arguments (`args`, or `editedArgs`)."""

    args: Json | None = None
    editedArgs: Json | None = None
    by: str | None = Field(None, description="A note of who decided (the principal is recorded).")


class DenyRequest(Body):
    """Deny, with a reason the model reads."""

    reason: str | None = None
    by: str | None = None


class DecideRequest(Body):
    """loopengine v1's durable decision."""

    decision: Literal["approve", "deny"]
    editedArgs: Json | None = None
    reason: str | None = None
    by: str | None = None


class AnswerRequest(Body):
    """The answer to a question."""

    answer: str
    by: str | None = None


# answers


class ErrorBody(Body):
    """Every error: one sentence."""

    error: str


class Health(Body):
    ok: Literal[True]
    version: str


class AgentSummary(Body):
    name: str
    systemPrompt: str | None
    description: str | None
    model: str | None


class Agents(Body):
    agents: list[AgentSummary]


class ForkedFrom(Body):
    """Where a fork came from."""

    session: str
    seq: int


class SessionSummary(Body):
    id: str
    title: str | None = Field(
        description="A model's title ([titles]), else its first user message (null: none yet)."
    )
    agent: str
    status: str
    lastSeq: int
    createdAt: str
    updatedAt: str
    forkedFrom: ForkedFrom | None


class Paged(Body):
    nextCursor: str | None = Field(
        description="The cursor of the next page; null at the end (a page may hold fewer "
        "entries than the limit and still have a next one)."
    )


class Sessions(Paged):
    sessions: list[SessionSummary]


class UsageGroup(Body):
    """Model usage summed over a group (a group's keys are those it was grouped by)."""

    agent: str | None = None
    session: str | None = None
    day: str | None = None
    model: str | None = nullable()
    requests: int
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    cost: float | None = Field(description="Null when no request had a price.")
    unpricedRequests: int = Field(description="Requests without a known price.")


class SessionView(Body):
    """A session: status, history, open items and usage; a page of the history adds where it
    stands. (v1: `{sessionId, history}` in v1's message shape.)"""

    sessionId: str
    history: list[Json]
    title: str | None = nullable("Its title, as the sessions list gives it (null: none yet).")
    activeAgent: str | None = Field(None, description="The agent it is with now (handoffs).")
    status: str | None = None
    lastSeq: int | None = None
    pending: list[PendingItem] | None = None
    usage: UsageGroup | None = None
    forkedFrom: ForkedFrom | None = nullable(
        "Where the session was forked from (null: not a fork)."
    )
    historyStart: int | None = Field(None, description="The index of the page's first message.")
    historyLength: int | None = None
    nextCursor: str | None = nullable("Reads the messages before the page (null at the first).")


class LoggedEvent(Body):
    seq: int
    at: str
    event: Json = Field(json_schema_extra=replaced({"x-component": "AnyEvent"}))


class EventPage(Body):
    events: list[LoggedEvent]
    nextAfter: int = Field(description="The `after` of the next read.")
    more: bool = Field(description="Events past this page were in the log.")


class Cancelled(Body):
    cancelled: bool = Field(description="The run ended cancelled.")


class Steered(Body):
    queued: Literal[True]


class Compacted(Body):
    sessionId: str
    compacted: bool
    reason: str | None = Field(None, description="Why there was nothing to compact.")
    events: list[Json] | None = events("The compaction's events.", required=False)
    stopReason: str | None = None


class Final(Body):
    """The run ended (v1: `stopReason` only when max_turns or denied, never error)."""

    text: str
    sessionId: str
    events: list[Json] = events("Logged events as wire JSON (token deltas are streams' only).")
    stopReason: str | None = None
    error: str | None = None
    output: Any = Field(None, description="A completed run's structured output (docs/output.md).")
    stopDetail: Literal["max_tokens"] | None = Field(
        None, description="Deprecated: present when stopReason is max_tokens (the answer was cut)."
    )


class Paused(Body):
    """The run paused on a pending item: the first open one (`pendingIds` has them all)."""

    pending: Literal[True]
    type: Literal["approval", "question"]
    id: str
    sessionId: str
    statusUrl: str
    events: list[Json] = events("The turn's logged events.")
    tool: str | None = None
    args: Json | None = None
    scope: dict[str, str] | None = None
    reason: str | None = nullable()
    approveUrl: str | None = None
    denyUrl: str | None = None
    question: str | None = None
    options: list[str] | None = nullable()
    answerUrl: str | None = None
    stopReason: Literal["paused"] | None = None
    pendingIds: list[str] | None = None


class AlreadyResolved(Body):
    """The item was decided before (with the run's answer too when that decision had not been
    acted on: it is, now)."""

    alreadyResolved: Literal[True]
    id: str
    status: str
    decidedBy: str | None
    sessionId: str


class Forked(Body):
    sessionId: str
    agent: str
    status: str
    lastSeq: int
    forkedFrom: ForkedFrom


class ReplayAnswer(Body):
    """The replay's report (`loopwright.replays`) and `text`, its rendering."""

    ok: bool
    text: str


class Approvals(Body):
    approvals: list[PendingItem]


class Questions(Body):
    questions: list[PendingItem]


class ApprovalPage(Approvals, Paged):
    pass


class QuestionPage(Questions, Paged):
    pass


class ItemPage(Paged):
    items: list[PendingItem]


class UsagePage(Paged):
    groups: list[UsageGroup]


class Durable(Body):
    """v1's durable routes: already resolved; recorded with items still open; or the run."""

    alreadyResolved: bool | None = None
    resolved: bool | None = None
    outstanding: int | None = None
    text: str | None = None
    sessionId: str | None = None
    stopReason: str | None = None


class DeliveryAttempt(Body):
    n: int
    at: str
    status: int | None
    error: str | None


class WebhookDelivery(Body):
    id: str
    target: str = Field(
        description="The webhook's name; an unnamed one's as `scheme://host[:port]/…`, never "
        "its URL's path, query or credentials."
    )
    item: str
    event: Literal["pending", "resolved"]
    state: Literal["due", "delivered", "failed"]
    attempts: int = Field(ge=0)
    lastStatus: int | None
    lastError: str | None
    createdAt: str
    deliveredAt: str | None
    tried: list[DeliveryAttempt]


class Deliveries(Paged):
    deliveries: list[WebhookDelivery]


MODELS: tuple[type[BaseModel], ...] = (
    *(MessageRequest, SteerRequest, ReplayRequest, ForkRequest, ApproveRequest, DenyRequest),
    *(DecideRequest, AnswerRequest, ErrorBody, Health, Agents, AgentConfig, Sessions),
    *(SessionView, EventPage, Cancelled, Steered, Compacted, Final, Paused, AlreadyResolved),
    *(Forked, ReplayAnswer, Approvals, Questions, ApprovalPage, QuestionPage, ItemPage, UsagePage),
    *(Durable, Deliveries, RulesCheckRequest, RulesReport, Trace),
    *(custom.CustomMessageRequest, custom.CustomAdded),
)
"""Every model the document names (those they use are in it too)."""
