"""Every event a run can emit: typed values with a literal `type`, one class per type.

The seventeen loopengine v1 types keep their exact names and fields; everything else is additive
and travels in its own type (never as a new field of a v1 type's v1 form). The order of one run:

    session hook:failed? [resumed batch] agent:handoff? input:received? steering:injected*
      ( step:started budget:check
        (text:delta | thinking:delta | tool:delta | model:retry | model:fallback)*
        reply:transformed? message:completed hook:failed? assistant:text?
        ( (approval:pending approval:resolved?)? actauth:decision )*   one per call, model order
        ( tool:started tool:update* toollane:result tool:output tool:result )*   calls that run
        ( loop:skipped? tool:output tool:result )*                   calls that do not run
        context:injected?                                    after the batch closed, if it did
        step:finished (tool:late_result | steering:injected | message:truncated | output:invalid)*
        agent:handoff?)*
    tool:late_result* hook:failed? <terminal> done

where <terminal> is exactly one of loop:done, loop:max_turns, loop:denied, loop:paused,
loop:aborted, loop:error, loop:terminated, and `done` is always last, even on error; an app's
`message:custom` is logged between runs only, never in a run's stream. The order
per tool call, of resumed batches and of late results is spelled out in PROTOCOL.md;
`loopwright.testing.check_events` enforces this grammar.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, get_args

from .messages import AssistantMessage, Attachment, CustomMessage, Usage, UserMessage
from .state._values import value
from .state.event_values import Nudge as Nudge
from .state.event_values import Origin as Origin
from .state.event_values import Scope as Scope

DecisionKind: TypeAlias = Literal["allow", "ask", "deny"]
RunStopReason: TypeAlias = Literal[
    "completed", "max_tokens", "max_turns", "denied", "paused", "aborted", "error", "terminated"
]


# ---- loopengine v1: engine events -----------------------------------------------------------


@value
class BudgetCheck:
    """Context-budget check, once before every model request."""

    action: Literal["ok", "nudge", "over_hard_limit"]
    used_tokens: int
    budget_tokens: int
    ratio: float
    nudge: Nudge | None = None
    type: Literal["budget:check"] = "budget:check"


@value
class PromptCompaction:
    """The prompt was compacted after the provider rejected it as too long (message counts)."""

    from_: int
    to: int
    type: Literal["prompt:compaction"] = "prompt:compaction"


@value
class AssistantText:
    """The model's text alongside a tool-using reply (its preamble)."""

    text: str
    type: Literal["assistant:text"] = "assistant:text"


@value
class ActauthDecision:
    """The gate's verdict on one tool call, in the order the model emitted the calls."""

    tool: str
    decision: DecisionKind
    reason: str
    type: Literal["actauth:decision"] = "actauth:decision"


@value
class ToolStarted:
    """An allowed call is about to run; its intent is committed before it runs."""

    id: str
    tool: str
    args: dict[str, Any]
    detail_text: str
    idempotency_key: str | None = None
    label: str | None = None  # (the tool's human name; full profile only, as `idempotency_key`)
    type: Literal["tool:started"] = "tool:started"


@value
class ToolResult:
    """A call's resolution: `Approved.`, `Error.`, `Denied.` or `Skipped.`."""

    id: str
    tool: str
    status_text: str
    args: dict[str, Any] | None = None
    detail_text: str | None = None
    type: Literal["tool:result"] = "tool:result"


@value
class ToollaneResult:
    """The raw outcome of a call that ran (`summary` is what the model reads)."""

    name: str
    summary: str
    type: Literal["toollane:result"] = "toollane:result"


@value
class SkillLoaded:
    skill: str
    type: Literal["skill:loaded"] = "skill:loaded"


@value
class LoopSkipped:
    """An approved call did not run because a sibling was denied."""

    name: str
    denied_tools: list[str]
    type: Literal["loop:skipped"] = "loop:skipped"


@value
class LoopMaxTurns:
    """Terminal: the step limit was reached without a final answer."""

    max_turns: int
    type: Literal["loop:max_turns"] = "loop:max_turns"


@value
class LoopDenied:
    """Terminal: a call was denied and the agent stops on denial."""

    denied_tools: list[str]
    type: Literal["loop:denied"] = "loop:denied"


@value
class LoopDone:
    """Terminal: a genuine finish, a reply with no tool calls."""

    text: str
    type: Literal["loop:done"] = "loop:done"


# ---- loopengine v1: adapter events ----------------------------------------------------------


@value
class Session:
    """First event of every run: the session it belongs to."""

    session_id: str
    type: Literal["session"] = "session"


@value
class ApprovalPending:
    """A call needs a human decision; resolve it by its unguessable `id`."""

    id: str
    tool: str
    args: dict[str, Any]
    scope: Scope
    reason: str
    requested_at: str
    label: str | None = None  # (the tool's human name; full profile only)
    type: Literal["approval:pending"] = "approval:pending"


@value
class QuestionPending:
    """The agent asked the person a question; answer it by `id`."""

    id: str
    question: str
    agent: str
    requested_at: str
    options: list[str] | None = None
    session_id: str | None = None
    type: Literal["question:pending"] = "question:pending"


@value
class Done:
    """Always the last event of a run."""

    text: str
    stop_reason: RunStopReason
    type: Literal["done"] = "done"


@value
class Error:
    """v1 clients' view of a failed run (the profile=v1 projection of `loop:error`)."""

    error: str
    type: Literal["error"] = "error"


# ---- additive ---------------------------------------------------------------------------------


@value
class InputReceived:
    """The run's input, durable before the first step."""

    message: UserMessage
    type: Literal["input:received"] = "input:received"


@value
class SteeringInjected:
    """A steering or follow-up message entered the conversation at a step boundary."""

    message: UserMessage
    mode: Literal["steer", "follow_up"]
    type: Literal["steering:injected"] = "steering:injected"


@value
class SteeringQueued:
    """A steering or follow-up message was sent to a durable session's running run; it enters
    the conversation later (`steering:injected`). Logged at once, so a crash does not lose it."""

    text: str
    mode: Literal["steer", "follow_up"]
    type: Literal["steering:queued"] = "steering:queued"


@value
class SteeringCleared:
    """The steering (`steer`), the follow-ups (`follow_up`) or both (None) queued for a durable
    session's running run were dropped (`Session.clear_queue`, a cancel); logged at once."""

    mode: Literal["steer", "follow_up"] | None = None
    type: Literal["steering:cleared"] = "steering:cleared"


@value
class StepStarted:
    """A step (one model request and its tool calls) begins; `step` counts from 1 per run."""

    step: int
    type: Literal["step:started"] = "step:started"


@value
class StepFinished:
    step: int
    usage: Usage | None = None
    type: Literal["step:finished"] = "step:finished"


@value
class TextDelta:
    delta: str
    type: Literal["text:delta"] = "text:delta"


@value
class ThinkingDelta:
    delta: str
    type: Literal["thinking:delta"] = "thinking:delta"


@value
class ToolDelta:
    """A fragment of a call's JSON arguments as they stream (`partial_args`: parsed so far)."""

    id: str
    tool: str
    delta: str
    partial_args: dict[str, Any] | None = None
    type: Literal["tool:delta"] = "tool:delta"


@value
class MessageCompleted:
    """The complete assistant reply with its usage; the history is rebuilt from these."""

    message: AssistantMessage
    type: Literal["message:completed"] = "message:completed"


@value
class MessagePartial:
    """Stored only (never streamed): what a reply still streaming added to its text since the
    last partial (`text`, from character `offset` on; 0 in old logs: the whole text so far),
    committed now and then so a crash mid-reply leaves carry-over for the next run."""

    text: str
    offset: int = 0
    type: Literal["message:partial"] = "message:partial"


@value
class MessageTruncated:
    """A reply without tools was cut by the output limit (`detail`); `message` asks it to go on."""

    detail: str
    message: UserMessage | None = None
    type: Literal["message:truncated"] = "message:truncated"


@value
class OutputInvalid:
    """The final answer failed the agent's output schema (`errors`); `message` asks again."""

    errors: list[str]
    message: UserMessage
    type: Literal["output:invalid"] = "output:invalid"


@value
class ModelRetry:
    """A model request failed retryably and is sent again after `delay` seconds."""

    attempt: int
    error: str
    delay: float
    type: Literal["model:retry"] = "model:retry"


@value
class ModelFallback:
    """The model `from_` failed past its retries (`error`): the rest of the run asks `to`, the
    agent's next fallback model (docs/models.md)."""

    from_: str
    to: str
    error: str
    type: Literal["model:fallback"] = "model:fallback"


@value
class CompactionStarted:
    reason: Literal["context", "steps", "turns", "manual", "prompt_too_long"]
    type: Literal["compaction:started"] = "compaction:started"


@value
class CompactionFinished:
    """The history's first `dropped` messages became `summary` (or went), but those at `pinned`
    (kept after it, in order); `from_`/`to` count messages. Replaying it rebuilds the same view."""

    from_: int
    to: int
    mode: Literal["summarize", "discard"]
    dropped: int
    summary: str | None = None
    pinned: tuple[int, ...] | None = None
    type: Literal["compaction:finished"] = "compaction:finished"


@value
class ToolUpdate:
    """Progress reported by a running tool."""

    id: str
    tool: str
    message: str
    progress: float | None = None
    details: Any = None  # (JSON for the doors only)
    type: Literal["tool:update"] = "tool:update"


@value
class ToolOutput:
    """The content the model reads for one call; every decided call gets exactly one."""

    id: str
    tool: str
    content: str
    is_error: bool = False
    attachments: tuple[Attachment, ...] | None = None
    stored: Attachment | None = None  # the whole result, when `content` is its preview
    details: Any = None  # (`ToolReturn.details`: JSON for the doors only, never the model)
    type: Literal["tool:output"] = "tool:output"


@value
class ToolInterrupted:
    """A call was cut off before its result (`[interrupted: …]`, `[cancelled: …]` output)."""

    id: str
    tool: str
    type: Literal["tool:interrupted"] = "tool:interrupted"


@value
class ToolLateResult:
    """What a call really did, known after its result was given: its thread ran on after it was
    cancelled or timed out (the model's history keeps the result it was given)."""

    id: str
    tool: str
    content: str
    is_error: bool = False
    type: Literal["tool:late_result"] = "tool:late_result"


@value
class ToolSuspended:
    """A call that cannot finish until pending items are resolved: a subagent's (in its session)
    or its own question (`NeedsAnswer`, in this one). The run pauses; the call runs again when it
    resumes. It ends the call's part of this run in place of `tool:result`."""

    id: str
    tool: str
    session_id: str
    """The session whose items the call waits on (the subagent's)."""
    pending_ids: list[str]
    type: Literal["tool:suspended"] = "tool:suspended"


@value
class PendingRequested:
    """The call the item announced just before (approval:pending, question:pending) is about."""

    id: str
    call_id: str
    kind: Literal["approval", "question"] = "approval"
    type: Literal["pending:requested"] = "pending:requested"


@value
class ApprovalResolved:
    """A human decided a pending approval."""

    id: str
    tool: str
    decision: Literal["approve", "deny"]
    by: str
    resolved_at: str
    args: dict[str, Any] | None = None
    """Edited arguments, when the approver replaced them."""
    reason: str | None = None
    type: Literal["approval:resolved"] = "approval:resolved"


@value
class QuestionResolved:
    id: str
    answer: str
    by: str
    resolved_at: str
    type: Literal["question:resolved"] = "question:resolved"


@value
class PendingDecided:
    """The single authority's record of a decision on a pending item (the first one wins;
    `skipped`: closed by a denial in its batch or a dead run's recovery), logged before any run
    acts on it; `args` are edited arguments."""

    id: str
    status: Literal["approved", "denied", "answered", "skipped"]
    by: str
    decided_at: str
    args: dict[str, Any] | None = None
    answer: str | None = None
    reason: str | None = None
    type: Literal["pending:decided"] = "pending:decided"


@value
class LoopPaused:
    """Terminal: waiting on pending items that no live human can answer now."""

    pending_ids: list[str]
    type: Literal["loop:paused"] = "loop:paused"


@value
class LoopAborted:
    """Terminal: the run was cancelled."""

    reason: str
    carry_over: str | None = None
    type: Literal["loop:aborted"] = "loop:aborted"


@value
class LoopError:
    """Terminal: the run failed (model failure past the retry bound, a raising hook...)."""

    error: str
    type: Literal["loop:error"] = "loop:error"


@value
class LoopTerminated:
    """Terminal: a tool's `terminate` hint or a continuation policy stopped the run."""

    reason: str
    type: Literal["loop:terminated"] = "loop:terminated"


@value
class RunInterrupted:
    """The previous run of this session died (crash, kill, power loss) before it finished: calls
    it had started get `[interrupted: …]` results, except idempotent ones, which run again."""

    interrupted_calls: list[str]
    rerun_calls: list[str]
    carry_over: str | None = None
    type: Literal["run:interrupted"] = "run:interrupted"


@value
class HookFailed:
    """An observe hook (`on_run_start`, `after_reply`, `on_run_end`) raised: the run goes on (the
    `loopwright.hooks` logger has the traceback)."""

    hook: str
    error: str
    type: Literal["hook:failed"] = "hook:failed"


@value
class ReplyTransformed:
    """A `transform_reply` hook changed the reply: the model's `original`, kept for audit; the
    `message:completed` right after it is the reply the run logs and acts on."""

    original: AssistantMessage
    type: Literal["reply:transformed"] = "reply:transformed"


@value
class ContextInjected:
    """Context the `after_batch` hooks added after a batch ran, for the next request."""

    message: UserMessage
    type: Literal["context:injected"] = "context:injected"


@value
class MessageCustom:
    """An app's custom message joined the history between runs (`Session.add`, HTTP); doors
    show it, the model sees only what the agent's `convert` hook makes of it."""

    message: CustomMessage
    type: Literal["message:custom"] = "message:custom"


@value
class SubagentEvent:
    """An event of a subagent's run, forwarded to its parent's stream."""

    origin: Origin
    event: Event
    type: Literal["subagent:event"] = "subagent:event"


@value
class AgentHandoff:
    """The session goes on with `to` after `from_`'s transfer `call_id` (docs/handoffs.md)."""

    from_: str
    to: str
    call_id: str
    history: Literal["full", "last_user", "summary"] = "full"
    summary: str | None = None
    type: Literal["agent:handoff"] = "agent:handoff"


V1Event: TypeAlias = (
    BudgetCheck
    | PromptCompaction
    | AssistantText
    | ActauthDecision
    | ToolStarted
    | ToolResult
    | ToollaneResult
    | SkillLoaded
    | LoopSkipped
    | LoopMaxTurns
    | LoopDenied
    | LoopDone
    | Session
    | ApprovalPending
    | QuestionPending
    | Done
    | Error
)

Terminal: TypeAlias = (
    LoopDone | LoopMaxTurns | LoopDenied | LoopPaused | LoopAborted | LoopError | LoopTerminated
)

Event: TypeAlias = (
    V1Event
    | InputReceived
    | SteeringInjected
    | SteeringQueued
    | SteeringCleared
    | StepStarted
    | StepFinished
    | TextDelta
    | ThinkingDelta
    | ToolDelta
    | MessageCompleted
    | MessagePartial
    | MessageTruncated
    | OutputInvalid
    | ModelRetry
    | ModelFallback
    | CompactionStarted
    | CompactionFinished
    | ToolUpdate
    | ToolOutput
    | ToolInterrupted
    | ToolLateResult
    | ToolSuspended
    | PendingRequested
    | ApprovalResolved
    | QuestionResolved
    | PendingDecided
    | LoopPaused
    | LoopAborted
    | LoopError
    | LoopTerminated
    | RunInterrupted
    | HookFailed
    | ReplyTransformed
    | ContextInjected
    | SubagentEvent
    | MessageCustom
    | AgentHandoff
)


def _types(union: Any) -> frozenset[str]:
    return frozenset(cls.__dataclass_fields__["type"].default for cls in get_args(union))


TERMINAL_TYPES = _types(Terminal)
V1_TYPES = _types(V1Event)
