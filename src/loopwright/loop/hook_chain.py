"""Several hooks at one point, as one: `compose(*hooks) -> Hooks`.

Plugins and the agent may each hook the same point; the run still sees one `Hooks`, so the
loop, its call sites and their error handling stay as they are (`hook_calls`). `compose` takes
the hooks in the order they run (for agents a project loads: the plugins in entry-point name
order, then the agent's own) and chains each point by its mode:

- *transform* (`before_request`, `transform_reply`, `after_tool`): each hook gets the value the
  one before it returned (None keeps it); the last value is the result.
- *context* (`after_batch`): every hook sees the same results; every context is added, in order.
- *around* (`around_tool`): the first hook is outermost; its `proceed` runs the next hook, the
  last one's runs the call.
- *veto/transform* (`before_tool`, `on_prompt`): a `Block` ends the chain and is the result.
  Otherwise `before_tool` hooks see the call with the arguments the ones before them replaced,
  and the last replacement is the result; `on_prompt` hooks see the input with the context the
  ones before them added, and every context is added, in order.
- *veto* (`continuation`) and the stop policy (`on_stop`): the first hook that answers (a
  `Stop`, a message to go on) ends the chain and is the result.
- *observe* (`on_run_start`, `after_reply`, `on_run_end`): every hook runs, whatever the others
  did. If some raised, the chain raises afterwards (the one error, or an `ExceptionGroup` of
  them), so the run goes on and says `hook:failed` as for one hook; the log's traceback shows
  each failure, with a note naming its hook.

A transform or veto hook that raises ends the chain, and the run, as one hook would. A point
only one of the hooks sets keeps that very callable: composing costs nothing then.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import fields, replace
from functools import partial
from typing import Any

from ..hooks import Block, Hooks, Stop

Hook = Callable[..., Any]


def compose(*hooks: Hooks) -> Hooks:
    """One `Hooks` that runs every given one's hooks at each point, in the given order."""
    points: dict[str, Hook] = {}
    for point in (f.name for f in fields(Hooks)):
        members = [h for h in (getattr(each, point) for each in hooks) if h is not None]
        if len(members) == 1:
            points[point] = members[0]
        elif members:
            points[point] = _named(_CHAINS[point](point, members), point, members)
    return Hooks(**points)


async def _call(hook: Hook, *args: Any) -> Any:
    result = hook(*args)
    return await result if inspect.isawaitable(result) else result


def _noted(exc: Exception, point: str, hook: Hook) -> Exception:
    exc.add_note(f"(raised by the {point} hook {name(hook)}, in a composed chain)")
    return exc


def _observe(point: str, members: Sequence[Hook]) -> Hook:
    async def chain(*args: Any) -> None:
        failures: list[Exception] = []
        for hook in members:
            try:
                await _call(hook, *args)
            except Exception as exc:
                failures.append(_noted(exc, point, hook))
        if len(failures) == 1:
            raise failures[0]
        if failures:
            raise ExceptionGroup(f"{len(failures)} {point} hooks raised", failures)

    return chain


async def _guarded(point: str, hook: Hook, *args: Any) -> Any:
    """A chained transform or veto hook's call: an error carries the hook's name."""
    try:
        return await _call(hook, *args)
    except Exception as exc:
        _noted(exc, point, hook)
        raise


def _transform(point: str, members: Sequence[Hook]) -> Hook:
    """`before_request(info, request)`, `after_tool(info, call, outcome)`: the value chains."""

    async def chain(*args: Any) -> Any:
        *fixed, value = args
        for hook in members:
            result = await _guarded(point, hook, *fixed, value)
            if result is not None:
                value = result
        return value

    return chain


def _before_tool(point: str, members: Sequence[Hook]) -> Hook:
    async def chain(info: Any, call: Any) -> Any:
        replaced = None
        for hook in members:
            verdict = await _guarded(point, hook, info, call)
            if isinstance(verdict, Block):
                return verdict
            if isinstance(verdict, dict):
                replaced, call = verdict, replace(call, args=verdict)
        return replaced

    return chain


def _on_prompt(point: str, members: Sequence[Hook]) -> Hook:
    async def chain(info: Any, text: str) -> Any:
        added: list[str] = []
        for hook in members:
            extra = await _guarded(point, hook, info, "\n\n".join([text, *added]))
            if isinstance(extra, Block):
                return extra
            if extra:
                added.append(extra)
        return "\n\n".join(added) or None

    return chain


def _contexts(point: str, members: Sequence[Hook]) -> Hook:
    async def chain(*args: Any) -> str | None:
        added = [extra for hook in members if (extra := await _guarded(point, hook, *args))]
        return "\n\n".join(added) or None

    return chain


def _around(point: str, members: Sequence[Hook]) -> Hook:
    async def chain(info: Any, call: Any, proceed: Callable[[], Awaitable[Any]]) -> Any:
        async def wrap(i: int) -> Any:  # hook i, around the ones after it
            if i == len(members):
                return await proceed()
            return await _guarded(point, members[i], info, call, partial(wrap, i + 1))

        return await wrap(0)

    return chain


def _first(point: str, members: Sequence[Hook]) -> Hook:
    """`continuation` (a `Stop`), `on_stop` (a message to go on): the first answer wins."""

    async def chain(*args: Any) -> Any:
        for hook in members:
            answer = await _guarded(point, hook, *args)
            if isinstance(answer, Stop) if point == "continuation" else answer:
                return answer
        return None

    return chain


_CHAINS: dict[str, Callable[[str, Sequence[Hook]], Hook]] = {
    "on_run_start": _observe,
    "on_run_end": _observe,
    "after_reply": _observe,
    "transform_reply": _transform,
    "around_tool": _around,
    "after_batch": _contexts,
    "on_prompt": _on_prompt,
    "before_request": _transform,
    "convert": _transform,
    "before_tool": _before_tool,
    "after_tool": _transform,
    "continuation": _first,
    "on_stop": _first,
}


def _named(chain: Hook, point: str, members: Sequence[Hook]) -> Hook:
    """The chain's name, in the `loopwright.hooks` log, lists its hooks."""
    chain.__qualname__ = f"compose.{point}[{', '.join(name(h) for h in members)}]"
    chain.__module__ = __name__
    return chain


def name(hook: Hook) -> str:
    """`module.qualname` of a hook, as the log names it."""
    return f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', repr(hook))}"
