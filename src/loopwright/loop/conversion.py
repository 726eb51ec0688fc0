"""The model's view of a session's history: what a request carries.

A history holds the app's `CustomMessage`s next to the model's messages; the model never sees
one as it is. `model_view` is applied to the history as it stands (after any compaction) as each
request is made, before `before_request`: the agent's `convert` hook (`hooks.Hooks.convert`) maps
the history to the messages the model reads — it may drop, reorder or turn a custom message into
a `UserMessage`; returning None (or the list it was given) keeps the default, which drops every
custom message. What it returns must be model messages only: a custom message left in it is a
programmer error (`TypeError`, which ends the run with `loop:error`, as a raising hook does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..hooks import RunInfo
from ..messages import CustomMessage, Message, ModelMessage
from .hook_calls import call_hook


def default_view(messages: Sequence[Message]) -> list[ModelMessage]:
    """The history without the app's custom messages."""
    return [m for m in messages if not isinstance(m, CustomMessage)]


async def model_view(
    convert: Callable[..., Any] | None, info: RunInfo, messages: Sequence[Message]
) -> list[ModelMessage]:
    """The messages a request carries: `convert(info, a copy of the history)`, or the
    default view."""
    if convert is None:
        return default_view(messages)
    given = list(messages)
    view = await call_hook(convert, info, given)
    if view is None or view is given:
        return default_view(messages)
    for message in view:
        if isinstance(message, CustomMessage):
            raise TypeError(
                f"the convert hook returned a CustomMessage (kind {message.kind!r}): the model "
                "reads user, assistant and tool messages only; turn it into one or drop it"
            )
    return list(view)
