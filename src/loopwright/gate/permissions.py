"""The permission gate: every tool call is allowed, asked about or denied before it runs (SPEC §5).

Rules are tried most specific scope first, then in file order; the first whose scope, tool glob
and condition hold decides, and `default_decision` covers the rest. The loop hands the gate the
validated arguments (what the tool will receive), never the model's raw text. The gate fails
closed: when a condition cannot be evaluated on the arguments (a missing field, a type its op
cannot compare), a later `deny` rule that holds still denies, and otherwise a human decides
(`ask`) — or `deny` when the default is `deny` — whatever the default, and the reason names the
rule and the field. A rules file:

    default_decision: ask                  # allow | ask | deny (default ask)
    rules:
      - name: small-refunds                # unique; the reason "matched rule 'small-refunds'"
        tool: issue_*                      # exact name or fnmatch glob
        scope: acme/production             # optional tenant/environment[/agent] globs (or a
                                           # mapping {tenant, environment, agent})
        when: {field: amount, op: lte, value: 50}   # or all: [..], any: [..], not: {..}
        decision: allow                    # ops: eq ne gt gte lt lte in contains matches exists
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from ..errors import ConfigError
from ..events import DecisionKind, Scope
from .rule_values import _ORDER, _kind
from .rule_values import Condition as Condition
from .rule_values import Op as Op
from .rule_values import Rule as Rule


@dataclass(frozen=True, slots=True)
class Decision:
    """What the gate says about one tool call, and why."""

    kind: DecisionKind
    """Run it (`allow`), ask a human first (`ask`), or refuse (`deny`)."""
    reason: str
    """For people and logs: `matched rule '<name>'`, or why the default decision applied."""
    unsure_deny: str | None = None
    """When the decision failed closed on a deny rule it could not evaluate: that rule's
    reason (other values of these arguments might be denied). An edit so made is refused."""


class Gate(Protocol):
    """Decides each tool call before it runs."""

    def decide(self, tool: str, args: dict[str, Any], scope: Scope) -> Decision:
        """The decision for one call of `tool` with `args` in `scope`.

        Called synchronously once per tool call, on the loop's hot path: implementations must be
        cheap, must not block on I/O, and must not raise for any arguments (fail closed instead).
        """
        ...


@dataclass(frozen=True, slots=True)
class Rules:
    """A rule set; `rules` is kept sorted by descending specificity, then given order."""

    rules: tuple[Rule, ...] = ()
    """The rules in the order they are tried."""
    default_decision: DecisionKind = "ask"
    """The decision when no rule applies or the arguments cannot be evaluated."""
    source: str | None = None
    """The file the rules came from, if any."""

    def __post_init__(self) -> None:
        ordered = sorted(self.rules, key=lambda rule: -rule.specificity)  # stable
        object.__setattr__(self, "rules", tuple(ordered))

    @classmethod
    def from_yaml(cls, text: str, *, source: str | None = None) -> Rules:
        """Parse a rules file; a mistake raises ConfigError naming `source` and the line."""
        import yaml  # (here: a program with no rules file never loads a YAML parser)

        from .rules_yaml import Parser

        label = source or "<rules>"
        try:
            loader = yaml.SafeLoader(text)
            rules, default = Parser(loader, label).document(loader.get_single_node())
            return cls(rules, default, source)
        except yaml.reader.ReaderError as error:
            line = text.count("\n", 0, error.position) + 1
            raise ConfigError(f"invalid YAML: {error.reason}", source=f"{label}:{line}") from None
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            where = f"{label}:{mark.line + 1}" if mark else label
            raise ConfigError(f"invalid YAML: {error.problem}", source=where) from None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Rules:
        """Read and parse a rules file."""
        source = os.fspath(path)
        try:
            with open(source, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"cannot read rules file: {error}", source=source) from None
        return cls.from_yaml(text, source=source)

    def decide(self, tool: str, args: dict[str, Any], scope: Scope) -> Decision:
        """The first covering rule whose condition holds decides. One that cannot be evaluated
        fails closed: the later rules are still tried for a `deny` that holds (which decides),
        and otherwise a human decides (`ask`), or `deny` when the default is `deny` — never
        `allow`, whatever the default: the result is never laxer than the arguments' real
        values could make it."""
        default = f"default decision '{self.default_decision}'"
        unknown: str | None = None  # why the first rule that could not be evaluated was not
        unsure_deny: str | None = None  # the same, for the first such deny rule
        for rule in self.rules:
            if not rule.covers(tool, scope):
                continue
            outcome = True if rule.when is None else _evaluate(rule.when, args)
            if isinstance(outcome, _Unknown):
                why = f"arguments could not be evaluated for rule '{rule.name}': {outcome.why}"
                unknown = unknown or why
                if rule.decision == "deny":
                    unsure_deny = unsure_deny or why
            elif outcome and (unknown is None or rule.decision == "deny"):
                return Decision(rule.decision, f"matched rule '{rule.name}'")
            elif outcome:
                break  # an earlier rule might have decided: fail closed
        if unknown is None:
            return Decision(self.default_decision, f"no rule matched: {default}")
        if self.default_decision == "deny":
            return Decision("deny", f"{unknown}; {default}", unsure_deny)
        return Decision("ask", f"{unknown}; a human decides (the gate fails closed)", unsure_deny)


class RulesFile:
    """A rules file, re-read whenever its mtime, size or inode changes: no restart needed.

    A version that fails to load leaves the last good rules in force and is reported in
    `last_error` until the file loads again. Replace the file atomically (write, then rename)
    so that a half-written version is never read.
    """

    path: str
    """The rules file."""
    rules: Rules
    """The rules in force: the last version of the file that loaded."""
    last_error: ConfigError | None
    """Why the file's current version is not in force, or None when it is."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._stamp = _stamp(self.path)
        self.rules = Rules.load(self.path)
        self.last_error = None

    def decide(self, tool: str, args: dict[str, Any], scope: Scope) -> Decision:
        """Reload the file if it changed, then decide with the rules in force."""
        self.refresh()
        return self.rules.decide(tool, args, scope)

    def refresh(self) -> ConfigError | None:
        """Reload the file if it changed; `last_error` (logged under `loopwright.rules`)."""
        if (stamp := _stamp(self.path)) != self._stamp:
            self._stamp = stamp
            try:
                self.rules, self.last_error = Rules.load(self.path), None
            except ConfigError as error:
                self.last_error = error
                logging.getLogger("loopwright.rules").error("%s; the last good rules stay", error)
        return self.last_error


ALLOWED = Decision("allow", "no rules: allowed")
"""`AllowAll`'s every decision."""


class AllowAll:
    """The gate of an agent without rules: every call is allowed."""

    def decide(self, tool: str, args: dict[str, Any], scope: Scope) -> Decision:
        """Allow."""
        return ALLOWED


# ---- evaluation: True, False, or _Unknown (why the arguments could not be evaluated) ----------


_MISSING = object()
_WANTED = {
    "in": "a single value",
    "contains": "a list, or a string and a string value",
    "matches": "a string",
}


@dataclass(frozen=True, slots=True)
class _Unknown:
    why: str


def _evaluate(condition: Condition, args: Any) -> bool | _Unknown:
    if condition.op == "not":
        outcome = _evaluate(condition.children[0], args)
        return outcome if isinstance(outcome, _Unknown) else not outcome
    if condition.op in ("all", "any"):
        # Three-valued: a child that settles the result (False for all, True for any) wins over
        # one that cannot be evaluated, since no value of that one could change the result.
        settles = condition.op == "any"
        unknown: _Unknown | None = None
        for child in condition.children:
            outcome = _evaluate(child, args)
            if outcome is settles:
                return settles
            if isinstance(outcome, _Unknown):
                unknown = unknown or outcome
        return unknown or not settles
    return _test(condition, _lookup(condition, args))


def _lookup(condition: Condition, args: Any) -> Any:
    """The argument at the condition's path, `_MISSING`, or _Unknown for a broken path."""
    if not isinstance(args, dict):
        return _Unknown(f"arguments are {_kind(args)}, not an object")
    current: Any = args
    for segment in condition._path:
        if isinstance(current, dict):
            if segment not in current:
                return _MISSING
            current = current[segment]
        elif isinstance(current, list) and segment.isascii() and segment.isdigit():
            if int(segment) >= len(current):
                return _MISSING
            current = current[int(segment)]
        else:
            return _Unknown(f"'{condition.field}' goes through {_kind(current)}")
    return current


def _test(condition: Condition, actual: Any) -> bool | _Unknown:
    op, expected, name = condition.op, condition.value, condition.field
    if isinstance(actual, _Unknown):
        return actual
    if op == "exists":
        return (actual is not _MISSING) is (expected is not False)
    if actual is _MISSING:
        return _Unknown(f"'{name}' is missing")
    if _is_nan(actual):  # compares false with everything: `gt 100` would let it through
        return _Unknown(f"'{name}' is NaN; op '{op}' cannot compare it")
    if not _readable(actual):  # no JSON shape (a lazy iterable, also inside): `eq` is False
        return _Unknown(f"'{name}' holds a value rules cannot read without using it up")
    if op in ("eq", "ne"):
        return _equal(actual, expected) is (op == "eq")
    if op == "in" and not isinstance(actual, dict | list):
        return any(_equal(actual, item) for item in expected)
    if op == "contains" and isinstance(actual, list):
        return any(_equal(item, expected) for item in actual)
    if op == "contains" and isinstance(actual, str) and isinstance(expected, str):
        return expected in actual
    if op == "matches" and isinstance(actual, str) and condition._pattern:
        return condition._pattern.search(actual) is not None
    if op in _ORDER and _kind(actual) == _kind(expected):
        return _ORDER[op](actual, expected)
    wanted = _WANTED.get(op) or _kind(expected)
    return _Unknown(f"'{name}' is {_kind(actual)}; op '{op}' needs {wanted}")


_JSON = (str, int, float, Decimal, type(None))  # (bool is an int)


def _readable(value: Any) -> bool:
    """JSON through and through: what `plain` makes of a validated value, unless it held a
    value it leaves as it is (one it cannot read without using it up)."""
    if isinstance(value, list):
        return all(map(_readable, value))
    if isinstance(value, dict):
        return all(map(_readable, value.values()))
    return isinstance(value, _JSON)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: a bool is never a number, and lists and objects compare item by item."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[key], b[key]) for key in a)
    return _kind(a) == _kind(b) and bool(a == b)


def _is_nan(value: Any) -> bool:
    return (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, Decimal) and value.is_nan()
    )


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino
