"""Compaction: keeping a long conversation inside the model's context window (SPEC §6).

The older part of the history is replaced by one summary message the model writes (`summarize`,
asked with the policy's own `prompt` when it has one) or simply dropped (`discard`); the newest
messages stay verbatim, and a tool call is never separated from its result. Messages the policy
pins (`compactable`, `keep_tools`) stay verbatim in place, with their tool call or results, and
never reach the summary. Besides a full context, a trigger fires every `every_steps` steps of a
run, or once `every_turns` replies have passed since the session's last compaction (counted from
the history, so across runs, restarts and takeovers alike). The change is one atomic replacement, announced by
`compaction:started` and recorded by `compaction:finished`, which carries everything needed to
rebuild the compacted view from the log (the originals stay in the log). `apply` makes the
change, when the run's events are applied to its state and when the log is replayed alike
(`replay`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Literal

from ..events import (
    BudgetCheck,
    CompactionFinished,
    CompactionStarted,
    Event,
    MessageCompleted,
    TextDelta,
)
from ..messages import (
    AssistantMessage,
    CustomMessage,
    Message,
    ToolResultMessage,
    UserMessage,
    message_chars,
)
from ..model_settings import ModelSettings
from ..models import Model, ModelFailure, ModelRequest
from .history import History

if TYPE_CHECKING:
    from .session_state import SessionState

SUMMARY_SYSTEM = (
    "You compress conversations. Summarise the conversation you are given so that an assistant "
    "can continue it without the original: the user's goals and constraints, facts established, "
    "actions taken with their results (tool names and outcomes), decisions, and open questions. "
    "Be concise and specific; keep names, numbers and identifiers exactly."
)
SUMMARY_HEADER = "[Summary of the earlier conversation]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """When and how an agent's history is compacted."""

    mode: Literal["summarize", "discard"] = "summarize"
    at_ratio: float = 0.85
    """Compact before a request once the context is this full (of the budget)."""
    every_steps: int | None = None
    """Also compact every N steps of a run."""
    keep_last: int = 6
    """Newest messages kept verbatim (more when needed to keep tool calls with their results)."""
    summary_max_tokens: int = 1024
    """Bound on the summary request's output."""
    prompt: str | None = None
    """The summary request's system prompt, instead of `SUMMARY_SYSTEM`."""
    every_turns: int | None = None
    """Also compact once this many model replies have passed since the session's last compaction
    (across its runs: counted from the history)."""
    compactable: Callable[[Message], bool] | None = field(default=None, compare=False)
    """Whether a message may be folded; one it refuses stays verbatim, in place (with its tool
    call and results: `pinned`), and never reaches the summary."""
    keep_tools: tuple[str, ...] = ()
    """Tools whose results (and their calls) are never folded: agent.yaml's `keep_tools:`."""

    def __repr__(self) -> str:
        """Its fields, a custom prompt by its size (it may be a whole file: `agents --show`)."""
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "prompt"]
        if self.prompt is not None:
            shown.append(f"prompt=<{len(self.prompt):,} characters>")
        return f"Compaction({', '.join(shown)})"


Compactability = Literal["ok", "empty", "just_compacted", "pinned"]
CompactionReason = Literal["context", "steps", "turns", "manual", "prompt_too_long"]


def compaction_due(
    policy: Compaction | None, check: BudgetCheck, step: int, state: SessionState
) -> CompactionReason | None:
    """Whether a trigger fires before this step's request: the context is full enough, or
    another `every_steps` steps of the run have passed, or `every_turns` of the session."""
    if policy is None:
        return None
    if check.ratio >= policy.at_ratio:
        return "context"
    if policy.every_steps and step > 1 and (step - 1) % policy.every_steps == 0:
        return "steps"
    if policy.every_turns and turns_since_compaction(state.history) >= policy.every_turns:
        return "turns"
    return None


def turns_since_compaction(history: History) -> int:
    """Model replies in the history since its last compaction (all of them before the first):
    durable, as the history is (the log, snapshots)."""
    newer = history.messages[history.compacted_at or 0 :]
    return sum(1 for message in newer if isinstance(message, AssistantMessage))


async def compact(
    history: History,
    model: Model,
    policy: Compaction | None,
    reason: CompactionReason,
    settings: ModelSettings | None = None,
    session_id: str | None = None,
    deadline: float | None = None,
) -> AsyncIterator[Event]:
    """The events of replacing the older history by a summary (or dropping it); nothing when
    there is nothing to compact. A summary the model cannot write (or not within `deadline`
    seconds, the run's per-request deadline) falls back to discarding. The history changes
    when `compaction:finished` is applied to it (`apply`). The summary is asked with the run's
    model `settings` (`summary_settings`) for `session_id`."""
    policy = policy or Compaction()
    if compactability(history, policy) != "ok":
        return
    cut = split_point(history.messages, policy.keep_last)
    kept = pinned(history.messages[:cut], policy)
    folded = [m for i, m in enumerate(history.messages[:cut]) if i not in set(kept)]
    yield CompactionStarted(reason=reason)
    summary, mode = None, policy.mode
    if mode == "summarize":
        try:
            asked = summary_settings(settings or ModelSettings(), policy.summary_max_tokens)
            async with asyncio.timeout(deadline):
                summary = await summarize(model, folded, asked, session_id, policy.prompt)
        except (SummaryFailed, TimeoutError):
            mode = "discard"
    before = len(history.messages)
    finished = CompactionFinished(
        from_=before,
        to=before - cut + len(kept) + (1 if summary else 0),
        mode=mode,
        dropped=cut,
        summary=summary,
        pinned=kept or None,
    )
    yield finished


def pinned(older: list[Message], policy: Compaction) -> tuple[int, ...]:
    """Positions in `older` (the part to fold) that stay verbatim: the messages the policy
    refuses to fold and the app's custom messages (the model never saw them), each with its group (a reply with tool calls and their results stay
    together, or the model would see a result without its call)."""
    if policy.compactable is None and not policy.keep_tools and not _has_custom(older):
        return ()
    groups: list[list[int]] = []
    for i, message in enumerate(older):
        if isinstance(message, ToolResultMessage) and groups:
            groups[-1].append(i)
        else:
            groups.append([i])
    return tuple(i for g in groups if any(_refused(older[j], policy) for j in g) for i in g)


def _has_custom(messages: list[Message]) -> bool:
    return any(isinstance(m, CustomMessage) for m in messages)


def _refused(message: Message, policy: Compaction) -> bool:
    if isinstance(message, CustomMessage):  # (an app's note: the model never saw it to fold it)
        return True
    if isinstance(message, ToolResultMessage) and message.tool in policy.keep_tools:
        return True
    return policy.compactable is not None and not policy.compactable(message)


def compactability(history: History, policy: Compaction) -> Compactability:
    """Whether compacting now under `policy` would change anything."""
    if history.compacted_at == len(history.messages):
        return "just_compacted"
    cut = split_point(history.messages, policy.keep_last)
    if cut == 0:
        return "empty"
    return "pinned" if len(pinned(history.messages[:cut], policy)) == cut else "ok"


def why_not(state: Compactability, policy: Compaction) -> str:
    """Why compacting now would change nothing (`state` is what `compactability` said)."""
    if state == "just_compacted":
        return "it was just compacted"
    if state == "pinned":
        return "every message before the kept tail is pinned (compactable, keep_tools)"
    return f"the history is short: the last {policy.keep_last} messages are always kept"


def split_point(messages: list[Message], keep_last: int) -> int:
    """Where the kept tail starts: at least `keep_last` messages, never starting on a tool
    result (its call stays with it), and never splitting a reply from its results."""
    cut = max(0, len(messages) - keep_last)
    while 0 < cut < len(messages) and isinstance(messages[cut], ToolResultMessage):
        cut -= 1
    return cut


def summary_settings(settings: ModelSettings, max_tokens: int) -> ModelSettings:
    """The run's settings as the summary request takes them: its sampling, metadata and
    provider extras, the summary's own output bound, no reasoning (the model's default: a
    summary needs none, and a thinking budget would not fit the bound) and no stop sequences
    (they would cut the summary short)."""
    return replace(settings, max_output_tokens=max_tokens, reasoning=None, stop=None)


def is_summary(request: ModelRequest) -> bool:
    """Whether `request` is a compaction's summary request (a scripted model goes on with the
    conversation it summarises)."""
    return request.purpose == "summary"


async def summarize(
    model: Model,
    older: list[Message],
    settings: ModelSettings,
    session_id: str | None = None,
    prompt: str | None = None,
) -> str:
    """The model's summary of `older` (asked with `prompt`, else `SUMMARY_SYSTEM`); raises
    `SummaryFailed` when it cannot write one."""
    request = ModelRequest(
        system=prompt or SUMMARY_SYSTEM,
        messages=[UserMessage(content=render(older))],
        settings=settings,
        session_id=session_id,
        purpose="summary",
    )
    text: list[str] = []
    async for item in model.stream(request):
        if isinstance(item, TextDelta):
            text.append(item.delta)
        elif isinstance(item, MessageCompleted):
            return item.message.text or "".join(text)
        elif isinstance(item, ModelFailure):
            raise SummaryFailed(item.error)
    raise SummaryFailed("the summary stream ended without a reply")


class SummaryFailed(Exception):
    pass


def render(messages: list[Message]) -> str:
    """A transcript of messages as plain text, for the summariser."""
    lines = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"user: {message.content}")
        elif isinstance(message, AssistantMessage):
            if message.text:
                lines.append(f"assistant: {message.text}")
            for call in message.tool_calls:
                lines.append(f"assistant called {call.name}({json.dumps(call.args)})")
        elif isinstance(message, ToolResultMessage):  # (an app's custom note: not the model's)
            flag = " (error)" if message.is_error else ""
            lines.append(f"result of {message.tool}{flag}: {message.content}")
    return "\n".join(lines)


def apply(history: History, finished: CompactionFinished) -> None:
    """Replace the older part of the history as `finished` records (live, or when the log is
    replayed): one atomic assignment. The summary comes first, then the pinned messages in their
    order, then the kept tail."""
    older, tail = history.messages[: finished.dropped], history.messages[finished.dropped :]
    head = (
        [UserMessage(content=f"{SUMMARY_HEADER}\n{finished.summary}")] if finished.summary else []
    )
    history.messages = [*head, *(older[i] for i in finished.pinned or ()), *tail]
    history.chars = sum(message_chars(m) for m in history.messages)
    history.reported_tokens = None
    history.compacted_at = len(history.messages)
