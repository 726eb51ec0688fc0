"""Compaction: keeping a long conversation inside the model's context window (SPEC §6).

The older part of the history is replaced by one summary message the model writes (`summarize`)
or simply dropped (`discard`); the newest messages stay verbatim, and a tool call is never
separated from its result. The change is one atomic replacement, announced by
`compaction:started` and recorded by `compaction:finished`, which carries everything needed to
rebuild the compacted view from the log (the originals stay in the log). `apply` makes the
change, when the run's events are applied to its state and when the log is replayed alike
(`replay`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Literal

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


Compactability = Literal["ok", "empty", "just_compacted"]
CompactionReason = Literal["context", "steps", "manual", "prompt_too_long"]


def compaction_due(
    policy: Compaction | None, check: BudgetCheck, step: int
) -> CompactionReason | None:
    """Whether a trigger fires before this step's request: the context is full enough, or
    another `every_steps` steps have passed."""
    if policy is None:
        return None
    if check.ratio >= policy.at_ratio:
        return "context"
    if policy.every_steps and step > 1 and (step - 1) % policy.every_steps == 0:
        return "steps"
    return None


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
    if compactability(history, policy.keep_last) != "ok":
        return
    cut = split_point(history.messages, policy.keep_last)
    yield CompactionStarted(reason=reason)
    summary, mode = None, policy.mode
    if mode == "summarize":
        try:
            asked = summary_settings(settings or ModelSettings(), policy.summary_max_tokens)
            async with asyncio.timeout(deadline):
                summary = await summarize(model, history.messages[:cut], asked, session_id)
        except (SummaryFailed, TimeoutError):
            mode = "discard"
    before = len(history.messages)
    finished = CompactionFinished(
        from_=before,
        to=before - cut + (1 if summary else 0),
        mode=mode,
        dropped=cut,
        summary=summary,
    )
    yield finished


def compactability(history: History, keep_last: int) -> Compactability:
    """Whether compacting now would change anything."""
    if history.compacted_at == len(history.messages):
        return "just_compacted"
    return "ok" if split_point(history.messages, keep_last) > 0 else "empty"


def why_not(state: Compactability, keep_last: int) -> str:
    """Why compacting now would change nothing (`state` is what `compactability` said)."""
    if state == "just_compacted":
        return "it was just compacted"
    return f"the history is short: the last {keep_last} messages are always kept"


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


async def summarize(
    model: Model, older: list[Message], settings: ModelSettings, session_id: str | None = None
) -> str:
    """The model's summary of `older`; raises `SummaryFailed` when it cannot write one."""
    request = ModelRequest(
        system=SUMMARY_SYSTEM,
        messages=[UserMessage(content=render(older))],
        settings=settings,
        session_id=session_id,
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
    replayed): one atomic assignment. The app's custom messages of that part stay (after the
    summary): the model never saw them, and doors still show them."""
    older, kept = history.messages[: finished.dropped], history.messages[finished.dropped :]
    notes = [m for m in older if isinstance(m, CustomMessage)]
    head = (
        [UserMessage(content=f"{SUMMARY_HEADER}\n{finished.summary}")] if finished.summary else []
    )
    history.messages = [*head, *notes, *kept]
    history.chars = sum(message_chars(m) for m in history.messages)
    history.reported_tokens = None
    history.compacted_at = len(history.messages)
