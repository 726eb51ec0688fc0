"""Hooks: named points where user code observes or changes a run (SPEC §3.3).

Each hook is an optional sync or async callable on `Hooks`. Its mode is fixed: *observe* hooks
return nothing; *transform* hooks return a replacement or None to keep the value; *veto* hooks
return `Block`/`Stop` (or a message to go on). A transform or veto hook that raises ends the run
with `loop:error`; every tool call of the current reply still gets a result. An observe hook
that raises does not: the run goes on, and says so with `hook:failed`. Either way the
`loopwright.hooks` logger records the failure at ERROR, with its traceback (`hook_calls`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from .model_settings import ModelSettings
from .state._values import frozen

if TYPE_CHECKING:
    from .events import RunStopReason
    from .models import ModelRequest
    from .tools import Outcome

    Proceed = Callable[[], Awaitable[Outcome]]


@frozen  # made per run: without object.__setattr__ (_values)
class RunInfo:
    """Who and where: passed to every hook."""

    session_id: str
    tenant: str
    environment: str
    agent: str
    settings: ModelSettings = field(default_factory=ModelSettings)
    """The run's own model settings (`Session.run(settings=...)`), over the agent's."""


def deployment() -> str:
    """`os.environ.get("LOOPWRIGHT_ENV", "production")` (a session's `environment` unless
    given), without the two KeyErrors that raises and catches when the variable is unset (2 µs
    a session): a look-up in `os.environ`'s own dict, which its every change updates."""
    data = getattr(os.environ, "_data", None)  # (CPython's `os._Environ` keeps its entries there)
    if data is None:
        return os.environ.get("LOOPWRIGHT_ENV", "production")
    raw = data.get(os.environ.encodekey("LOOPWRIGHT_ENV"))
    return "production" if raw is None else os.environ.decodevalue(raw)


@dataclass(frozen=True, slots=True)
class Block:
    """Veto: refuse the input or the tool call, with a reason."""

    reason: str


@dataclass(frozen=True, slots=True)
class Stop:
    """Veto: end the run (`loop:terminated`) with a reason."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """Optional callables, each sync or async. Unset hooks cost nothing."""

    on_run_start: Callable[[RunInfo], Any] | None = None
    """Observe: a run begins (after `session`)."""
    on_run_end: Callable[[RunInfo, RunStopReason], Any] | None = None
    """Observe: a run ends with this stop reason (also after errors), before its terminal
    event."""
    on_prompt: Callable[[RunInfo, str], Block | str | None] | None = None
    """Veto/transform: `Block` refuses the input; a string is added as context after it."""
    before_request: Callable[[RunInfo, ModelRequest], ModelRequest | None] | None = None
    """Transform: replace the request (system prompt, messages, tools)."""
    convert: Callable[[RunInfo, list[Message]], list[Message] | None] | None = None
    """Transform: the history (compacted) → the model's view, before `before_request`; what
    it returns holds no `CustomMessage` (the default drops them: `loop.conversion`)."""
    after_reply: Callable[[RunInfo, AssistantMessage], Any] | None = None
    """Observe: the complete reply (as `transform_reply` left it)."""
    transform_reply: Callable[[RunInfo, AssistantMessage], AssistantMessage | None] | None = None
    """Transform: replace the reply, before it is logged and acted on (`reply:transformed`)."""
    around_tool: Callable[[RunInfo, ToolCall, Proceed], Any] | None = None
    """Wrap an allowed call: return its `Outcome`, from `await proceed()` or not. One that raises
    is the call's error result, and the run goes on (`loop.hook_points`)."""
    after_batch: Callable[[RunInfo, list[ToolResultMessage]], str | None] | None = None
    """Transform: the batch's results joined the history; a string is added as context."""
    before_tool: Callable[[RunInfo, ToolCall], Block | dict[str, Any] | None] | None = None
    """Veto/transform, before the gate: `Block` makes an error result; a dict replaces args."""
    after_tool: Callable[[RunInfo, ToolCall, Outcome], Outcome | None] | None = None
    """Transform: replace a call's outcome (e.g. redact it, or mark it `terminate`)."""
    continuation: Callable[[RunInfo, AssistantMessage], Stop | None] | None = None
    """Veto: after a batch ran, `Stop` ends the run."""
    on_stop: Callable[[RunInfo, str], str | None] | None = None
    """Stop policy: the run is about to finish with this text; return a message to go on."""
