"""The hook points about a reply and its batch that do more than one call of `call_hook`:
`transform_reply` (the reply changed before it is logged and acted on), `around_tool` (an
allowed call wrapped) and `after_batch` (context added once a batch's results are in).

- `transformed`: a changed reply is checked as the model's is (`replies.check_reply`) and logged
  as `reply:transformed` (the model's own, for audit) then `message:completed` (the changed one,
  which the history holds and the run acts on). A hook that raises ends the run (`loop:error`),
  as any transform hook does; the reply is then never logged (its text is the carry-over).
- `wrapped`: the runner's `around` when the hook is set (unset, nothing wraps a call). The hook
  stands where the tool stands: one that raises, or returns no `Outcome`, is the call's error
  result (the model can act on it), logged to `loopwright.hooks` at ERROR, and the run goes on;
  what the call returned, if it ran, is withheld, as for an `after_tool` hook that fails. A call
  whose hook is cut short (a cancel) after it ran gets `CUT`, never its raw output (P3).
- `context_after`: the batch closed (its results are the history's last messages): the hook's
  context joins the history as `context:injected`, before the next request.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from .. import events as ev
from ..errors import describe
from ..hooks import RunInfo
from ..messages import AssistantMessage, ToolResultMessage, UserMessage
from ..state.session_state import SessionState
from ..tools import Outcome, Scheduled
from .hook_calls import call_hook
from .replies import check_reply

log = logging.getLogger("loopwright.hooks")

CUT = Outcome(
    content="[error: the call ran but its around_tool hook did not finish: its output is withheld]",
    is_error=True,
)

Around = Callable[[Scheduled, Callable[[], Awaitable[Outcome]]], Awaitable[Outcome]]


async def transformed(
    hook: Any, info: RunInfo, reply: AssistantMessage, problems: dict[str, str]
) -> tuple[list[ev.Event], AssistantMessage, dict[str, str]]:
    """The reply's events as the hook leaves it, the reply the run acts on, its problems."""
    changed = await call_hook(hook, info, reply)
    if changed is None or changed == reply:
        return [ev.MessageCompleted(message=reply)], reply, problems
    if not isinstance(changed, AssistantMessage):
        raise TypeError(f"transform_reply returned {type(changed).__name__}, not a reply")
    message, problems = check_reply(changed)
    events: list[ev.Event] = [
        ev.ReplyTransformed(original=reply),
        ev.MessageCompleted(message=message),
    ]
    return events, message, problems


def wrapped(hook: Any, info: RunInfo, outcomes: dict[str, Outcome]) -> Around | None:
    """The runner's `around` for the `around_tool` hook, or None when it is unset."""
    return None if hook is None else partial(_around, hook, info, outcomes)


async def _around(
    hook: Any,
    info: RunInfo,
    outcomes: dict[str, Outcome],
    item: Scheduled,
    run: Callable[[], Awaitable[Outcome]],
) -> Outcome:
    call, ran = item.call, False

    async def proceed() -> Outcome:
        nonlocal ran
        outcome = await run()
        ran, outcomes[call.id] = True, CUT  # (its result, should the hook be cut short now)
        return outcome

    try:
        result = hook(info, call, proceed)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, Outcome):
            raise TypeError(f"around_tool returned {type(result).__name__}, not an Outcome")
    except Exception as exc:
        name = f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', hook)}"
        log.exception("around_tool hook %s raised (call %s): an error result", name, call.id)
        what = "the call ran, its output is withheld" if ran else "the call did not run"
        return Outcome(
            content=f"[error: around_tool hook failed ({what}): {describe(exc)}]", is_error=True
        )
    return result


async def context_after(
    hook: Any, info: RunInfo, state: SessionState, calls: int
) -> list[ev.Event]:
    """The `after_batch` hook's context, once the batch of `calls` calls closed."""
    if state.batch is not None or not calls:
        return []
    results = [m for m in state.history.messages[-calls:] if isinstance(m, ToolResultMessage)]
    text = await call_hook(hook, info, results)
    return [ev.ContextInjected(message=UserMessage(content=text))] if text else []
