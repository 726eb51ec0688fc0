"""The values of a rule set (`permissions.Rules`): a rule, its condition, and what both a rules
file (`rules_yaml`) and the gate read of them. (Below both: the parser needs no gate.)"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any, Literal, TypeAlias, get_args

from ..events import DecisionKind, Scope

Op: TypeAlias = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "matches", "exists"]
_OPS = get_args(Op)


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed `when`: a test of one argument, or "all", "any" or "not" of `children`."""

    op: Op | Literal["all", "any", "not"]
    """The test's operator, or the combinator joining `children`."""
    field: str = ""
    """Tests: a dot-path into the arguments (`meta.priority`; `items.0.sku` indexes a list)."""
    value: Any = None
    """Tests: the operand; a list for `in`, a regex for `matches`, a bool for `exists`."""
    children: tuple[Condition, ...] = ()
    """Combinators: the joined conditions (exactly one for "not")."""
    _path: tuple[str, ...] = dataclasses.field(init=False, repr=False, compare=False)
    _pattern: re.Pattern[str] | None = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_path", tuple(self.field.split(".")))
        pattern = re.compile(self.value) if self.op == "matches" else None
        object.__setattr__(self, "_pattern", pattern)


@dataclass(frozen=True, slots=True)
class Rule:
    """Calls of `tool` in a matching tenant and environment, when `when` holds, get `decision`."""

    name: str
    """Unique within its file; the reason of every decision it makes."""
    tool: str
    """The tool's exact name or an fnmatch-style glob (`db_*`)."""
    decision: DecisionKind
    """The decision when the rule applies."""
    tenant: str = "*"
    """Glob over the scope's tenant; a literal adds 4 to the specificity."""
    environment: str = "*"
    """Glob over the scope's environment; a literal adds 2 to the specificity."""
    when: Condition | None = None
    """The condition on the arguments, if any."""
    agent: str = "*"
    """Glob over the scope's agent; a literal adds 1 to the specificity."""

    @property
    def specificity(self) -> int:
        """How literal the rule's scope is (0 to 7: tenant, then environment, then agent);
        more specific rules are tried first."""
        literal = _is_literal
        return 4 * literal(self.tenant) + 2 * literal(self.environment) + literal(self.agent)

    def covers(self, tool: str, scope: Scope) -> bool:
        """Whether the tool and scope globs match, the condition aside."""
        return (
            _glob(self.tool, tool)
            and _glob(self.tenant, scope.tenant)
            and _glob(self.environment, scope.environment)
            and _glob(self.agent, scope.agent)
        )


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
_KINDS: dict[type, str] = {str: "a string", list: "a list", dict: "an object", type(None): "null"}


def _kind(value: Any) -> str:
    """The JSON name of a value's type, as reasons show it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | Decimal):  # a validated `Decimal` argument is a number
        return "a number"
    return _KINDS.get(type(value)) or f"a {type(value).__name__}"


def _glob(pattern: str, text: str) -> bool:
    return pattern == "*" or pattern == text or fnmatchcase(text, pattern)


def _is_literal(pattern: str) -> bool:
    return not any(char in pattern for char in "*?[")
