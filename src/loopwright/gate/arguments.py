"""Arguments as the gate sees them: the validated values a tool will receive, as plain data.

The gate decides on what will run. A tool's `validate` coerces the model's JSON (`"true"` → True,
`"1000"` → 1000) and may build richer values (pydantic models, dataclasses, enums, dates);
`plain` turns those back into the shapes rules are written against — objects keyed by field name
(or alias), lists, numbers, strings, booleans and null. It reads the attributes the tool will
read (a `RootModel`'s root, a secret's value), never a model's custom serialisers or masks, so
what the gate judges is what runs. `gate_decision` asks the gate on them; `vet_edit` puts a
human's edited arguments through the tool's schema and the rules again. `prepared` runs a tool's
`prepare_arguments` on the model's raw arguments first, so hooks, schema and rules see its fix.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
from collections.abc import Iterator, Mapping
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any

from .permissions import AllowAll, Decision, Gate

if TYPE_CHECKING:
    from ..events import Scope
    from ..messages import ToolCall
    from ..tools import Tool

_SCALARS = (bool, int, float, str, Decimal, type(None))
log = logging.getLogger("loopwright.tools")


def prepared(tool: Tool, call: ToolCall) -> dict[str, Any] | str:
    """The arguments a call goes on with: the model's own (`call.args`, the same object) for a
    tool without `prepare_arguments`, else what that function makes of a copy of them — or, when
    it raises or gives no dict, the error text the call's result reads (logged). It runs again
    wherever a call is decided again (a resumed or recovered batch), so it must be a pure,
    deterministic function of the arguments; the reply in the log keeps what the model sent."""
    prepare = tool.prepare_arguments
    if prepare is None:
        return call.args
    try:
        args = prepare(copy.deepcopy(call.args))
        if not isinstance(args, dict):
            raise TypeError(f"prepare_arguments returned {type(args).__name__}, not a dict")
    except Exception as exc:
        log.warning("tool %s (call %s): prepare_arguments raised", call.name, call.id, exc_info=exc)
        return f"Invalid arguments for tool '{call.name}': {type(exc).__name__}: {exc}"
    return args


def plain(value: Any) -> Any:
    """The JSON shape of a validated value (a `Decimal` stays exact; a value of a type with no
    JSON shape stays as it is, and a rule's test on it fails closed)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:  # the common case, without the abstract `Mapping` check below
        return {key if type(key) is str else _key(key): plain(item) for key, item in value.items()}
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {_key(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, set | frozenset):
        items = [plain(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if getattr(type(value), "__pydantic_root_model__", False):  # a RootModel is its root
        return plain(value.root)
    if hasattr(value, "get_secret_value"):  # pydantic's secrets: the value the tool reads
        return plain(value.get_secret_value())
    fields = getattr(type(value), "__pydantic_fields__", None)
    if isinstance(fields, dict):  # a pydantic model: its fields as the model's JSON names them
        out = {(info.alias or name): plain(getattr(value, name)) for name, info in fields.items()}
        extra = getattr(value, "__pydantic_extra__", None) or {}
        return out | {_key(key): plain(item) for key, item in extra.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Iterator):  # (a lazy iterable: reading it would leave the tool none)
        return value  # a rule's test on it fails closed
    try:  # dates, UUIDs, paths, bytes: the strings pydantic would send
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value)
    except Exception:
        return value


def _key(key: Any) -> str:
    key = plain(key)
    return key if isinstance(key, str) else json.dumps(key, default=str)


def vet_edit(tool: Tool, gate: Gate, scope: Scope, args: dict[str, Any]) -> dict[str, Any]:
    """The validated values of a human's edited arguments, or `ValueError` saying why the edit
    is refused: it fails the tool's schema, the gate denies it, or a deny rule cannot be
    evaluated on it (the reason names the rule). An `ask` does not ask again: the human who
    made the edit approves it."""
    try:
        if (problem := not_json(args)) is not None:
            raise ValueError(problem)
        kwargs = tool.validate(args)
    except ValueError as exc:
        raise ValueError(f"edited arguments are invalid: {exc}") from None
    vet_values(tool, gate, scope, kwargs)
    return kwargs


def vet_values(tool: Tool, gate: Gate, scope: Scope, kwargs: dict[str, Any]) -> None:
    """Put an edit's validated values through the rules (`vet_edit`), again at a resumption:
    `ValueError` when the gate denies them or cannot evaluate a deny rule on them."""
    if tool.gated:
        decision = gate_decision(gate, tool, kwargs, scope)
        if decision.kind == "deny":
            raise ValueError(f"edited arguments are denied: {decision.reason}")
        if decision.unsure_deny is not None:
            raise ValueError(f"edited arguments are refused: {decision.unsure_deny}")


MAX_DEPTH = 100
"""How deep arguments may nest (the log's reader stops at 200 levels, its events included)."""


def not_json(value: Any, path: str = "", depth: int = 0) -> str | None:
    """Why `value` is not JSON the log can keep, or None: a NaN or an infinity (`json.loads`
    reads them from `NaN` or `1e400`; no JSON encoder writes them back), or objects and lists
    nested deeper than `MAX_DEPTH`."""
    kind = type(value)
    if kind is dict or (kind not in _SEQUENCES and isinstance(value, Mapping)):
        items: Any = value.items()
    elif kind in _SEQUENCES or isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif isinstance(value, (float, Decimal)):
        return None if _finite(value) else f"{path or 'the value'} is {value}, not a JSON number"
    else:
        return None
    if depth >= MAX_DEPTH:
        return f"they nest deeper than {MAX_DEPTH} levels"
    for key, item in items:
        if type(item) in _PLAIN:  # (the common case, at once)
            continue
        where = f"{path}.{key}" if path else str(key)
        if (problem := not_json(item, where, depth + 1)) is not None:
            return problem
    return None


def _finite(number: float | Decimal) -> bool:
    return number.is_finite() if isinstance(number, Decimal) else math.isfinite(number)


_PLAIN = {str, int, bool, type(None)}
_SEQUENCES = {list, tuple}


def gate_decision(gate: Gate, tool: Tool, kwargs: dict[str, Any], scope: Scope) -> Decision:
    """The gate's decision on the values the tool will receive, as plain data (a gate without
    rules reads none, so none are converted for it)."""
    if type(gate) is AllowAll:
        return gate.decide(tool.name, kwargs, scope)
    return gate.decide(tool.name, plain(kwargs), scope)
