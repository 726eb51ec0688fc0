"""Parsing a rules file (`permissions.Rules.from_yaml`): from YAML nodes, which know their line
numbers, so that every mistake is a `ConfigError` naming the file and the line."""

from __future__ import annotations

import re
from typing import Any, Literal, NoReturn, cast

import yaml

from ..errors import ConfigError
from ..events import DecisionKind
from .rule_values import _OPS, _ORDER, Condition, Rule, _kind

_SCOPE_KEYS = ("tenant", "environment", "agent")
_SCOPE_SHAPES = (
    "scope must be 'tenant/environment[/agent]' or a mapping of tenant, environment, agent"
)
_CONDITION = (
    "exactly one of {field, op, value} (e.g. {field: amount, op: lte, value: 50}), "
    "all: [...], any: [...] or not: {...}"
)
"""What a condition looks like, for the errors about one."""
_OPERAND_KINDS: dict[str, tuple[str, ...]] = {
    "exists": ("a boolean",),
    "in": ("a list",),
    "matches": ("a string",),
}
_OPERAND_KINDS |= dict.fromkeys(_ORDER, ("a number", "a string"))


class Parser:
    def __init__(self, loader: yaml.SafeLoader, label: str) -> None:
        self.loader, self.label = loader, label

    def document(self, root: yaml.Node | None) -> tuple[tuple[Rule, ...], DecisionKind]:
        """The rules, and the default decision."""
        if root is None or self.value(root) is None:
            return (), "ask"
        top = self.mapping(root, "the rules file", {"default_decision", "rules"})
        default = self.decision(top["default_decision"]) if "default_decision" in top else "ask"
        node = top.get("rules")
        items = [] if node is None or self.value(node) is None else self.sequence(node, "rules", 0)
        names: set[str] = set()
        return tuple(self.rule(item, names) for item in items), default

    def rule(self, node: yaml.Node, names: set[str]) -> Rule:
        keys = self.mapping(node, "a rule", {"name", "tool", "decision", "scope", "when"})
        for required in ("name", "tool", "decision"):
            if required not in keys:
                self.fail(node, f"a rule needs '{required}'")
        name = self.string(keys["name"], "name")
        if name in names:
            self.fail(keys["name"], f"duplicate rule name '{name}'")
        names.add(name)
        scope = self.scope(keys["scope"]) if "scope" in keys else ("*", "*", "*")
        when = self.condition(keys["when"]) if "when" in keys else None
        tool, decision = self.string(keys["tool"], "tool"), self.decision(keys["decision"])
        return Rule(name, tool, decision, scope[0], scope[1], when, scope[2])

    def scope(self, node: yaml.Node) -> tuple[str, str, str]:
        """Every segment named is honoured; any other shape is an error."""
        if isinstance(node, yaml.MappingNode):
            keys = self.mapping(node, "a scope", set(_SCOPE_KEYS))
            parts = [self.string(keys[k], k) if k in keys else "*" for k in _SCOPE_KEYS]
        else:
            parts = self.string(node, "scope").split("/")
            if len(parts) not in (2, 3) or not all(parts):
                self.fail(node, _SCOPE_SHAPES)
        tenant, environment, agent = (*parts, "*")[:3]
        return tenant, environment, agent

    def condition(self, node: yaml.Node) -> Condition:
        allowed = {"field", "op", "value", "all", "any", "not"}
        keys = self.mapping(node, "a condition", allowed, shape=_CONDITION)
        op = next(iter(keys)) if len(keys) == 1 else None
        if op == "not":
            return Condition("not", children=(self.condition(keys["not"]),))
        if op in ("all", "any"):
            children = (self.condition(item) for item in self.sequence(keys[op], op, 1))
            return Condition(cast(Literal["all", "any"], op), children=tuple(children))
        if not {"field", "op"} <= keys.keys() or keys.keys() & {"all", "any", "not"}:
            self.fail(node, f"a condition is {_CONDITION}")
        return self.test(node, keys)

    def test(self, node: yaml.Node, keys: dict[str, yaml.Node]) -> Condition:
        field = self.string(keys["field"], "field")
        if not all(field.split(".")):
            self.fail(keys["field"], f"field '{field}' has an empty path segment")
        op = self.value(keys["op"])
        if op not in _OPS:
            self.fail(keys["op"], f"unknown op {op!r}; expected one of {', '.join(_OPS)}")
        if "value" not in keys and op != "exists":
            self.fail(node, f"op '{op}' needs a value")
        value_node = keys.get("value", node)
        value = self.value(value_node) if "value" in keys else True
        kinds = _OPERAND_KINDS.get(op, ())
        if not _is_json(value) or (kinds and _kind(value) not in kinds):
            wanted = " or ".join(kinds or ("a JSON value",))
            self.fail(value_node, f"op '{op}' needs {wanted} as its value, not {_kind(value)}")
        try:
            return Condition(op, field, value)
        except re.error as error:
            self.fail(value_node, f"invalid pattern {value!r}: {error}")

    def mapping(
        self, node: yaml.Node, what: str, allowed: set[str], shape: str = ""
    ) -> dict[str, yaml.Node]:
        """The mapping's keys (each in `allowed`); `shape` says what is expected when not."""
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping" + (f": {shape}" if shape else ""))
        keys: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str) or key not in allowed:
                expected = f"; expected {shape}" if shape else ""
                self.fail(key_node, f"unknown key {key!r} in {what}{expected}")
            if key in keys:
                self.fail(key_node, f"duplicate key '{key}' in {what}")
            keys[key] = value_node
        return keys

    def sequence(self, node: yaml.Node, what: str, least: int) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode) or len(node.value) < least:
            self.fail(node, f"'{what}' must be a {'non-empty ' * least}list")
        return cast(list[yaml.Node], node.value)

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not value:
            self.fail(node, f"'{what}' must be a non-empty string")
        return value

    def decision(self, node: yaml.Node) -> DecisionKind:
        value = self.value(node)
        if value not in ("allow", "ask", "deny"):
            self.fail(node, f"decision must be allow, ask or deny, not {value!r}")
        return cast(DecisionKind, value)

    def value(self, node: yaml.Node) -> Any:
        return self.loader.construct_document(node)

    def fail(self, node: yaml.Node, message: str) -> NoReturn:
        raise ConfigError(message, source=f"{self.label}:{node.start_mark.line + 1}")


def _is_json(value: Any) -> bool:
    if isinstance(value, list):
        return all(map(_is_json, value))
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_json(item) for key, item in value.items())
    return value is None or isinstance(value, bool | int | float | str)
