"""The gate decides on what will run: arguments are validated (and coerced) first, the rules see
the validated values, the tool runs on exactly those values, a call whose arguments fail
validation never reaches a human, and a condition that cannot be evaluated fails closed."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, RootModel, SecretStr

from conftest import call, run_agent, scripted
from loopwright import Agent, Rules, tool
from loopwright.approvals import ApprovalRequest, approve_all, deny_all
from loopwright.events import Scope
from loopwright.gate.arguments import plain
from loopwright.gate.permissions import Condition, Decision, Rule

received: list[dict[str, Any]] = []


class Meta(BaseModel):
    level: int
    flags: list[bool] = []
    sub_id: int = Field(0, alias="subId")


@tool
def act(
    amount: int,
    price: float,
    force: bool,
    tags: list[int],
    meta: Meta,
    note: str | None = None,
    total: Decimal = Decimal(0),
) -> str:
    """Act on everything."""
    received.append(
        {"amount": amount, "price": price, "force": force, "tags": tags, "meta": meta}
        | {"note": note, "total": total}
    )
    return "done"


@tool
def delete(path: str, force: bool = False) -> str:
    """Delete a file."""
    received.append({"path": path, "force": force})
    return f"deleted {path}"


@tool
def refund(order: str, amount: int, meta: dict[str, Any] | None = None) -> str:
    """Refund an order."""
    received.append({"order": order, "amount": amount, "meta": meta})
    return f"refunded {amount}"


BYPASSES = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: no-force, tool: delete, decision: deny, when: {field: force, op: eq, value: true}}
  - {name: big-refunds, tool: refund, decision: deny, when: {field: amount, op: gt, value: 100}}
  - name: vip-refunds
    tool: refund
    decision: deny
    when: {field: meta.tier, op: eq, value: vip}
""")


def shop(model: Any, rules: Any = BYPASSES, **kw: Any) -> Agent:
    received.clear()
    return Agent(model=model, tools=[delete, refund, act], rules=rules, **kw)


def decisions(result: Any) -> list[tuple[str, str, str]]:
    return [(e.tool, e.decision, e.reason) for e in result.events if e.type == "actauth:decision"]


async def test_force_as_the_string_true_is_denied():
    model = scripted({"tool_calls": [call("delete", path="/etc", force="true")]}, "unused")
    result = await run_agent(shop(model))
    assert decisions(result) == [("delete", "deny", "matched rule 'no-force'")]
    assert received == [] and result.stop_reason == "denied"


async def test_an_amount_as_a_string_is_compared_as_the_number_the_tool_gets():
    model = scripted({"tool_calls": [call("refund", order="A-1", amount="1000")]}, "unused")
    result = await run_agent(shop(model))
    assert decisions(result) == [("refund", "deny", "matched rule 'big-refunds'")]
    assert received == []


async def test_the_tool_runs_on_the_coerced_values_the_gate_allowed():
    args = {"order": "A-1", "amount": "50", "meta": {"tier": "gold"}}
    result = await run_agent(shop(scripted({"tool_calls": [call("refund", **args)]}, "ok")))
    assert decisions(result) == [("refund", "allow", "no rule matched: default decision 'allow'")]
    assert received == [{"order": "A-1", "amount": 50, "meta": {"tier": "gold"}}]


async def test_an_unevaluable_condition_asks_a_human_even_when_the_default_is_allow():
    model = scripted({"tool_calls": [call("refund", order="A-1", amount=5, meta={})]}, "ok")
    result = await run_agent(shop(model))
    pending = next(e for e in result.events if e.type == "approval:pending")
    assert pending.reason == (
        "arguments could not be evaluated for rule 'vip-refunds': 'meta.tier' is missing; "
        "a human decides (the gate fails closed)"
    )
    assert result.stop_reason == "paused" and received == []
    model = scripted({"tool_calls": [call("refund", order="A-1", amount=5)]}, "ok")
    result = await run_agent(shop(model), approver=deny_all)  # `meta` defaults to None
    assert decisions(result) == [
        (
            "refund",
            "deny",
            "arguments could not be evaluated for rule 'vip-refunds': 'meta.tier' goes through "
            "null; a human decides (the gate fails closed) — human denied: denied by deny_all",
        )
    ]
    assert received == []


async def test_an_unevaluable_condition_is_denied_when_the_default_is_deny():
    rules = Rules.from_yaml("""
default_decision: deny
rules:
  - {name: small, tool: refund, decision: allow, when: {field: meta.cap, op: gte, value: 5}}
""")
    model = scripted({"tool_calls": [call("refund", order="A", amount=5, meta={"cap": "x"})]})
    result = await run_agent(shop(model, rules))
    assert decisions(result) == [
        (
            "refund",
            "deny",
            "arguments could not be evaluated for rule 'small': 'meta.cap' is a string; "
            "op 'gte' needs a number; default decision 'deny'",
        )
    ]


async def test_an_unevaluable_rule_never_hides_a_later_deny_that_holds():
    rules = Rules.from_yaml("""
default_decision: ask
rules:
  - {name: big-refunds, tool: refund, decision: deny, when: {field: meta.cap, op: gt, value: 9}}
  - {name: order-x, tool: refund, decision: deny, when: {field: order, op: eq, value: X}}
  - {name: rest, tool: refund, decision: allow}
""")
    scope = Scope(tenant="default", environment="production", agent="agent")
    unknown = "arguments could not be evaluated for rule 'big-refunds': 'meta.cap' is missing"
    assert rules.decide("refund", {"order": "X", "meta": {}}, scope) == Decision(
        "deny", "matched rule 'order-x'"
    )
    assert rules.decide("refund", {"order": "Y", "meta": {}}, scope) == Decision(
        "ask", f"{unknown}; a human decides (the gate fails closed)", unknown
    )
    model = scripted({"tool_calls": [call("refund", order="X", amount=5, meta={})]}, "ok")
    result = await run_agent(shop(model, rules), approver=approve_all)
    assert decisions(result) == [("refund", "deny", "matched rule 'order-x'")]
    assert received == [] and result.stop_reason == "denied"


class Mode(RootModel[str]):
    pass


@tool
def switch(mode: Mode, token: SecretStr) -> str:
    """Switch mode with a token."""
    received.append({"mode": mode.root, "token": token.get_secret_value()})
    return "switched"


async def test_a_root_model_and_a_secret_are_judged_on_the_values_the_tool_reads():
    rules = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: no-danger, tool: switch, decision: deny, when: {field: mode, op: eq, value: danger}}
  - {name: no-prod, tool: switch, decision: deny, when: {field: token, op: matches, value: ^prod_}}
""")
    assert plain({"mode": Mode("x"), "token": SecretStr("s")}) == {"mode": "x", "token": "s"}
    for args, rule in [
        ({"mode": "danger", "token": "t"}, "no-danger"),
        ({"mode": "calm", "token": "prod_1"}, "no-prod"),
    ]:
        model = scripted({"tool_calls": [call("switch", **args)]}, "ok")
        result = await run_agent(Agent(model=model, tools=[switch], rules=rules))
        assert decisions(result) == [("switch", "deny", f"matched rule '{rule}'")]
    received.clear()
    model = scripted({"tool_calls": [call("switch", mode="calm", token="test_1")]}, "ok")
    result = await run_agent(Agent(model=model, tools=[switch], rules=rules))
    assert received == [{"mode": "calm", "token": "test_1"}] and result.stop_reason == "completed"


async def test_a_lazy_iterable_is_never_read_by_the_gate():
    """pydantic validates an `Iterable` argument as it is read: the gate must not read it (the
    tool would get it empty). A rule on it fails closed, `eq` too (an iterator equals no list:
    a deny would never match); rules on the others still apply."""
    got: list[list[int]] = []

    @tool
    def total(items: Iterable[int], label: str) -> str:
        """Add the items up."""
        got.append(list(items))
        return "ok"

    rules = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: no-x, tool: total, decision: deny, when: {field: label, op: eq, value: x}}
  - {name: not-1-2, tool: total, decision: deny, when: {field: items, op: eq, value: [1, 2]}}
  - {name: few, tool: total, decision: allow, when: {field: items, op: contains, value: 1}}
""")
    model = scripted({"tool_calls": [call("total", items=[1, "2"], label="y")]}, "ok")
    result = await run_agent(Agent(model=model, tools=[total], rules=rules), approver=approve_all)
    assert got == [[1, 2]] and result.stop_reason == "completed"
    [decision] = decisions(result)
    assert decision[1:] == (
        "allow",
        "arguments could not be evaluated for rule 'not-1-2': 'items' holds a value rules "
        "cannot read without using it up; a human decides (the gate fails closed) — human "
        "approved",
    )


async def test_a_lazy_iterable_inside_a_list_is_never_judged_unequal():
    """The same for lazy iterables inside a list: `eq` and `contains` cannot say no."""
    got: list[list[list[str]]] = []

    @tool
    def run_steps(steps: list[Iterable[str]]) -> str:
        """Run the steps."""
        got.append([list(step) for step in steps])
        return "ran"

    rules = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: no-rm, tool: run_steps, decision: deny, when: {field: steps, op: contains, value: [rm, -rf]}}
""")
    model = scripted({"tool_calls": [call("run_steps", steps=[["rm", "-rf"]])]}, "ok")
    result = await run_agent(Agent(model=model, tools=[run_steps], rules=rules), approver=deny_all)
    assert got == [] and result.stop_reason == "denied"
    [(_, kind, reason)] = decisions(result)
    assert kind == "deny" and reason.startswith(
        "arguments could not be evaluated for rule 'no-rm': 'steps' holds a value rules cannot"
    )


async def test_invalid_arguments_never_reach_a_human():
    asked: list[ApprovalRequest] = []
    model = scripted({"tool_calls": [call("delete", path="/x", force="maybe")]}, "fixed")
    result = await run_agent(shop(model, Rules()), approver=asked.append)
    assert asked == [] and decisions(result) == []
    [error] = [e for e in result.events if e.type == "tool:result"]
    assert error.status_text == "Error."
    assert not [e for e in result.events if e.type == "approval:pending"]
    assert received == [] and result.stop_reason == "completed"


async def test_a_nan_never_slips_under_a_numeric_deny():
    rules = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: pricey, tool: act, decision: deny, when: {field: price, op: gt, value: 100}}
""")
    args = {"amount": 1, "price": "nan", "force": False, "tags": [], "meta": {"level": 1}}
    result = await run_agent(shop(scripted({"tool_calls": [call("act", **args)]}), rules))
    pending = next(e for e in result.events if e.type == "approval:pending")
    assert pending.reason == (
        "arguments could not be evaluated for rule 'pricey': 'price' is NaN; op 'gt' cannot "
        "compare it; a human decides (the gate fails closed)"
    )


def test_plain_is_the_json_shape_of_validated_values():
    class Colour(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Point:
        x: int
        tags: frozenset[str]

    meta = Meta.model_validate({"level": "3", "flags": ["true", 0], "subId": "7"})
    assert plain({"meta": meta, "c": Colour.RED, "p": Point(1, frozenset("ba")), "t": (1, 2)}) == {
        "meta": {"level": 3, "flags": [True, False], "subId": 7},
        "c": "red",
        "p": {"x": 1, "tags": ["a", "b"]},
        "t": [1, 2],
    }
    assert plain({1: Decimal("2.50")}) == {"1": Decimal("2.50")}


# ---- the property: the decision on the model's arguments is the decision on what runs -------

PATHS = {
    "amount": "int",
    "price": "float",
    "force": "bool",
    "tags": "list",
    "tags.0": "int",
    "meta.level": "int",
    "meta.flags.1": "bool",
    "meta.subId": "int",
    "note": "str",
    "total": "decimal",
}
finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
VALUES = {
    "int": st.integers(-2000, 2000),
    "float": finite,
    "bool": st.booleans(),
    "str": st.text(max_size=5),
    "decimal": st.decimals(-2000, 2000, places=2, allow_nan=False),
}


@st.composite
def typed(draw: st.DrawFn) -> dict[str, Any]:
    """Values of `act`'s parameters, as the tool should receive them."""
    return {
        "amount": draw(VALUES["int"]),
        "price": draw(finite),
        "force": draw(st.booleans()),
        "tags": draw(st.lists(VALUES["int"], max_size=3)),
        "meta": {
            "level": draw(VALUES["int"]),
            "flags": draw(st.lists(st.booleans(), max_size=3)),
            "subId": draw(VALUES["int"]),
        },
        "note": draw(st.none() | VALUES["str"]),
        "total": draw(VALUES["decimal"]),
    }


def spelled(draw: st.DrawFn, value: Any) -> Any:
    """`value` as a model might send it: as is, or coerced from a string."""
    if isinstance(value, dict):
        return {k: spelled(draw, v) for k, v in value.items()}
    if isinstance(value, list):
        return [spelled(draw, v) for v in value]
    if isinstance(value, bool):
        words = ["true", "1", "yes", "on"] if value else ["false", "0", "no", "off"]
        return draw(st.sampled_from([value, *words]))
    if isinstance(value, int):
        return draw(st.sampled_from([value, str(value), float(value)]))
    if isinstance(value, float):
        return draw(st.sampled_from([value, repr(value)]))
    if isinstance(value, Decimal):
        return draw(st.sampled_from([str(value), float(value)]))
    return value


def operand(value: Any) -> Any:
    """A rule's operand is JSON: a decimal becomes a float."""
    return float(value) if isinstance(value, Decimal) else value


@st.composite
def conditions(draw: st.DrawFn) -> Condition:
    field = draw(st.sampled_from(sorted(PATHS)))
    values = VALUES.get(PATHS[field], VALUES["int"]).map(operand)
    op = draw(st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "exists"]))
    if op == "in":
        return Condition("in", field, draw(st.lists(values, max_size=3)))
    if op == "exists":
        return Condition("exists", field, draw(st.booleans()))
    if op == "contains":
        return Condition("contains", field, draw(VALUES["int"]))
    return Condition(op, field, draw(values))


class Recorder:
    """The rules, recording what the gate was shown and what it said."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.seen: list[tuple[Any, Decision]] = []

    def decide(self, tool: str, args: dict[str, Any], scope: Scope) -> Decision:
        decision = self.rules.decide(tool, args, scope)
        self.seen.append((args, decision))
        return decision


@settings(database=None, max_examples=150, deadline=None)
@given(
    data=st.data(),
    values=typed(),
    whens=st.lists(conditions(), min_size=1, max_size=3),
    kinds=st.lists(st.sampled_from(["allow", "ask", "deny"]), min_size=3, max_size=3),
    default=st.sampled_from(["allow", "ask", "deny"]),
)
def test_the_decision_on_raw_arguments_is_the_decision_on_what_runs(
    data: st.DataObject,
    values: dict[str, Any],
    whens: list[Condition],
    kinds: list[Any],
    default: Any,
) -> None:
    raw = spelled(data.draw, values)
    rules = Rules(
        tuple(Rule(f"r{i}", "act", kinds[i], when=when) for i, when in enumerate(whens)), default
    )
    gate = Recorder(rules)
    model = scripted({"tool_calls": [call("act", **raw)]}, "ok")
    result = asyncio.run(run_agent(shop(model, gate, on_deny="continue"), approver=approve_all))
    scope = Scope(tenant="default", environment="production", agent="agent")
    expected = rules.decide("act", plain(values), scope)
    [(shown, decision)] = gate.seen
    assert shown == plain(values) and decision == expected
    if decision.kind == "deny":
        assert received == []
    else:  # allowed, or approved by the human: it ran on exactly what the gate was shown
        [ran] = received
        assert plain(ran) == shown
    assert result.stop_reason == "completed"
