"""Bad replies are data: a reply's tool calls made fit to keep, to answer and to send back.

A model (or the server in front of it) may send two calls with one id, a call with no id, a
tool name that is not a string, or arguments that are not an object. None of that may crash a
run, and none of it may reach the history as it came: every provider needs each call of a reply
to carry a unique id that exactly one result answers. `check_reply` gives such calls a
deterministic id and a usable name, and says what was wrong with each; the loop answers them
with an error result the model reads, and never runs them. The reply is renamed before anyone
sees it, so the history, the events and the log agree.

    call_1, call_1    →  call_1 (runs), call_1-2 (error: the id was already used)
    "" (no id), 3rd   →  call_2 (error: no id); a taken id gets -2, -3, … until free
    name 42 or ""     →  name "invalid_tool_name" (error: the name must be a non-empty string)
    args [1, 2]       →  args {} (error: the arguments must be a JSON object)
    args {"n": 1e400} →  args {} (error: infinity and NaN are not JSON)
    args `{"n": 1,`   →  args {} (error: the arguments are not JSON, with the text the model sent)

The last is a provider's: arguments that do not parse are kept as `unparsed(text, problem)`, so
the model reads what was wrong and sends the call again, instead of a blind retry of the same
request (which fails again at temperature 0, and whose usage would be lost).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..gate.arguments import not_json
from ..messages import AssistantMessage, ToolCall

INVALID_NAME = "invalid_tool_name"
"""The name a call whose tool name is not a non-empty string carries in the history (a name
every provider accepts); the error result says what the model sent."""


class Unparsed(dict[str, Any]):
    """A call's arguments that did not parse: empty, with the text and the parser's problem."""

    __slots__ = ("problem", "text")

    def __init__(self, text: str, problem: str) -> None:
        super().__init__()
        self.text, self.problem = text, problem


def unparsed(text: str, problem: str) -> dict[str, Any]:
    """The arguments of a call whose JSON did not parse (`check_reply` answers it)."""
    return Unparsed(text, problem)


def wire_text(value: object) -> str:
    """A provider's reading of an id or name off the wire: absent (`None`) is empty, anything
    else as text. The loop's `check_reply` then deals with what is empty or repeated."""
    return "" if value is None else value if isinstance(value, str) else str(value)


def check_reply(message: AssistantMessage) -> tuple[AssistantMessage, dict[str, str]]:
    """The reply with its bad calls made usable, and call id → why that call will not run.

    A reply with nothing wrong is returned as it is (the same object), with no problems."""
    calls = message.tool_calls
    if not calls or _clean(calls):
        return message, {}
    taken = {c.id for c in calls if isinstance(c.id, str) and c.id}
    used: set[str] = set()
    problems: dict[str, str] = {}
    fixed: dict[int, ToolCall] = {}  # index among the calls → its replacement
    for index, call in enumerate(calls):
        why: list[str] = []
        new_id, name, args = call.id, call.name, call.args
        if not isinstance(call.id, str) or not call.id:
            why.append(f"the call had no id (got {_shown(call.id)})")
            new_id = _free(f"call_{index}", taken | used, first=True)
        elif call.id in used:
            why.append(
                f"its id {call.id!r} was already used by an earlier call of the same reply "
                "(call ids must be unique)"
            )
            new_id = _free(call.id, taken | used, first=False)
        if not isinstance(name, str) or not name:
            why.append(f"the tool name must be a non-empty string (got {_shown(name)})")
            name = INVALID_NAME
        if isinstance(args, Unparsed):
            shown = args.text if len(args.text) <= 200 else args.text[:197] + "..."
            why.append(f"the arguments are not a JSON object ({args.problem}): {shown!r}")
            args = {}
        elif not isinstance(args, dict):
            why.append(f"the arguments must be a JSON object (got {_shown(args)})")
            args = {}
        elif (problem := not_json(args)) is not None:  # no encoder writes it back as read
            why.append(f"the arguments must be JSON: {problem}")
            args = {}
        used.add(new_id)
        if why:
            fixed[index] = ToolCall(id=new_id, name=name, args=args)
            problems[new_id] = f"Not run: {'; '.join(why)}. Send the call again if you meant it."
    parts, index = [], 0
    for part in message.parts:
        if isinstance(part, ToolCall):
            part, index = fixed.get(index, part), index + 1
        parts.append(part)
    return replace(message, parts=tuple(parts)), problems


def _clean(calls: list[ToolCall]) -> bool:
    ids: set[str] = set()
    for call in calls:
        if not (
            isinstance(call.id, str)
            and call.id
            and call.id not in ids
            and isinstance(call.name, str)
            and call.name
            and isinstance(call.args, dict)
            and not isinstance(call.args, Unparsed)
            and not_json(call.args) is None
        ):
            return False
        ids.add(call.id)
    return True


def _free(base: str, taken: set[str], *, first: bool) -> str:
    """`base` itself when `first` and free, else the first free `base-2`, `base-3`, …"""
    if first and base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
