"""A rule's scope honours every segment it names — tenant, environment and agent — and a scope
of any other shape is a ConfigError naming the file and line. (test_permissions.py is at the
module size limit: these live here.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import call, run_agent, scripted
from loopwright import Agent, tool
from loopwright.errors import ConfigError
from loopwright.events import Scope
from loopwright.gate.permissions import Decision, Rules

NO_MATCH = Decision("allow", "no rule matched: default decision 'allow'")


def scope(agent: str, tenant: str = "acme", environment: str = "production") -> Scope:
    return Scope(tenant=tenant, environment=environment, agent=agent)


def rules(text: str) -> Rules:
    return Rules.from_yaml(textwrap.dedent(text), source="rules.yaml")


def test_an_agent_segment_is_honoured():
    gate = rules(
        """
        default_decision: allow
        rules:
          - {name: a-no-refunds, tool: refund, decision: deny, scope: '*/*/agent-a'}
          - {name: b-asks, tool: refund, decision: ask, scope: {agent: agent-b}}
          - {name: globbed, tool: wipe, decision: deny, scope: 'acme/prod*/agent-?'}
        """
    )
    assert [(r.tenant, r.environment, r.agent) for r in gate.rules] == [
        ("acme", "prod*", "agent-?"),  # a literal tenant: tried first
        ("*", "*", "agent-a"),
        ("*", "*", "agent-b"),
    ]
    refused = Decision("deny", "matched rule 'a-no-refunds'")
    assert gate.decide("refund", {}, scope("agent-a")) == refused
    assert gate.decide("refund", {}, scope("agent-b")) == Decision("ask", "matched rule 'b-asks'")
    assert gate.decide("refund", {}, scope("agent-c")) == NO_MATCH
    assert gate.decide("wipe", {}, scope("agent-c")) == Decision("deny", "matched rule 'globbed'")
    assert gate.decide("wipe", {}, scope("agent-cc")) == NO_MATCH
    assert gate.decide("wipe", {}, scope("agent-c", environment="dev")) == NO_MATCH


def test_specificity_is_tenant_then_environment_then_agent_then_file_order():
    gate = rules(
        """
        rules:
          - {name: any, tool: t, decision: allow}
          - {name: agent, tool: t, decision: deny, scope: '*/*/support'}
          - {name: env, tool: t, decision: ask, scope: '*/production'}
          - {name: env-agent, tool: t, decision: allow, scope: '*/production/support'}
          - {name: tenant, tool: t, decision: deny, scope: 'acme/*'}
          - {name: all-three, tool: t, decision: ask, scope: 'acme/production/support'}
        """
    )
    names = ["all-three", "tenant", "env-agent", "env", "agent", "any"]
    assert [r.name for r in gate.rules] == names
    assert [r.specificity for r in gate.rules] == [7, 4, 3, 2, 1, 0]
    assert gate.decide("t", {}, scope("support")).reason == "matched rule 'all-three'"
    assert gate.decide("t", {}, scope("other")).reason == "matched rule 'tenant'"
    assert gate.decide("t", {}, scope("support", tenant="x")).reason == "matched rule 'env-agent'"
    assert gate.decide("t", {}, scope("other", tenant="x")).reason == "matched rule 'env'"
    assert gate.decide("t", {}, scope("support", "x", "dev")).reason == "matched rule 'agent'"
    assert gate.decide("t", {}, scope("other", "x", "dev")).reason == "matched rule 'any'"


RULE = "rules:\n  - name: a\n    tool: t\n    decision: allow\n"  # lines 1-4; the scope is on 5
SHAPES = "scope must be 'tenant/environment[/agent]' or a mapping of tenant, environment, agent"


@pytest.mark.parametrize(
    ("scope_text", "message"),
    [
        ("acme", SHAPES),
        ("'*/*/agent-a/extra'", SHAPES),
        ("'acme//support'", SHAPES),
        ("'/production'", SHAPES),
        ("'acme/production/'", SHAPES),
        ("3", "'scope' must be a non-empty string"),
        ("{team: support}", "unknown key 'team' in a scope"),
        ("{agent: ''}", "'agent' must be a non-empty string"),
        ("[acme, production]", "'scope' must be a non-empty string"),
    ],
)
def test_a_scope_of_another_shape_names_the_file_and_line(
    tmp_path: Path, scope_text: str, message: str
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULE + f"    scope: {scope_text}\n")
    with pytest.raises(ConfigError) as error:
        Rules.load(path)
    assert str(error.value) == f"{path}:5: {message}"


@tool
def refund(amount: int) -> str:
    """Refund."""
    return f"refunded {amount}"


async def test_two_agents_sharing_a_rules_file_get_their_own_rules(tmp_path: Path):
    path = tmp_path / "rules.yaml"
    path.write_text(
        "default_decision: allow\n"
        "rules:\n"
        "  - {name: a-no-refunds, tool: refund, decision: deny, scope: '*/*/agent-a'}\n"
    )
    reasons = {}
    for name in ("agent-a", "agent-b"):
        model = scripted({"tool_calls": [call("refund", amount=5)]}, "ok")
        result = await run_agent(Agent(name=name, model=model, tools=[refund], rules=path))
        [decision] = [e for e in result.events if e.type == "actauth:decision"]
        reasons[name] = (decision.decision, decision.reason)
    assert reasons == {
        "agent-a": ("deny", "matched rule 'a-no-refunds'"),
        "agent-b": ("allow", "no rule matched: default decision 'allow'"),
    }
