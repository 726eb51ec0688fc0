"""How a run calls its hooks (`hooks.Hooks`), and what becomes of one that raises.

A transform or veto hook is called with `call_hook`: one that raises is logged and its error
ends the run (`loop:error`); the call of an `after_tool` hook that raised (or was stopped) gets
an error result, never its raw output (`calls.WITHHELD`). An observe hook is called with `observe`: one that raises is logged
and told as `hook:failed`, and the run goes on. Both log to `loopwright.hooks` at ERROR, with
the traceback.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from ..errors import describe
from ..events import Event, HookFailed
from ..hooks import Hooks

log = logging.getLogger("loopwright.hooks")


async def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """Call a transform or veto hook; one that raises is logged, and ends the run."""
    try:
        result = hook(*args)
        if inspect.isawaitable(result):
            result = await result
    except Exception:
        log.exception("hook %s raised; the run ends with loop:error", _name(hook))
        raise
    return result


async def observe(hooks: Hooks, point: str, *args: Any) -> list[Event]:
    """Call the observe hook `point`, if set; one that raises is logged and the run goes on."""
    hook = getattr(hooks, point)
    try:
        if hook is not None and inspect.isawaitable(result := hook(*args)):
            await result
    except Exception as exc:
        log.exception("observe hook %s (%s) raised; the run goes on", point, _name(hook))
        return [HookFailed(hook=point, error=describe(exc))]
    return []


def _name(hook: Any) -> str:
    return f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', repr(hook))}"
