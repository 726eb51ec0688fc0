"""Handoffs (docs/handoffs.md): the transfer tools, the switch in the run, the history modes,
the rules, and the active agent as state (reload, fork, snapshots)."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Session
from loopwright.errors import ConfigError
from loopwright.events import AgentHandoff
from loopwright.gate.permissions import Rules
from loopwright.handoffs import Handoff
from loopwright.messages import ToolResultMessage, UserMessage
from loopwright.state.handoffs import SUMMARY_HEADER
from loopwright.state.replay import fold
from loopwright.state.snapshots import from_snapshot, to_snapshot
from loopwright.testing import types

pytestmark = pytest.mark.anyio


def pair(history: Any = "full", triage_rules: Any = None) -> tuple[Agent, Agent, Any, Any]:
    billing_model = scripted("Your refund is on its way.", "Anything else?")
    triage_model = scripted(
        {"text": "Let me hand you over.", "tool_calls": [call("transfer_to_billing", "t1")]},
        "Back at triage.",
    )
    billing = Agent(
        model=billing_model,
        name="billing",
        description="Refunds and invoices.",
        instructions="You are billing.",
        handoffs=["triage"],
    )
    triage = Agent(
        model=triage_model,
        name="triage",
        instructions="You are triage.",
        handoffs=[Handoff(billing, history=history)],
        rules=triage_rules,
    )
    return triage, billing, triage_model, billing_model


TRIAGE_STEP = [
    "step:started",
    "budget:check",
    "text:delta",
    "text:delta",
    "tool:delta",
    "message:completed",
    "assistant:text",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:finished",
]
ANSWER_STEP = ["step:started", "budget:check", "text:delta", "text:delta", "message:completed"]


async def test_triage_hands_off_to_billing_in_the_same_run() -> None:
    triage, billing, triage_model, billing_model = pair()
    session = Session(triage)
    result = await drive(session.run("I want a refund"))
    assert types(result.events) == [
        "session",
        "input:received",
        *TRIAGE_STEP,
        "agent:handoff",
        *ANSWER_STEP,
        "step:finished",
        "loop:done",
        "done",
    ]
    handoff = next(e for e in result.events if isinstance(e, AgentHandoff))
    assert handoff == AgentHandoff(from_="triage", to="billing", call_id="t1", history="full")
    assert result.text == "Your refund is on its way."
    (answer,) = [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert answer == ToolResultMessage(
        call_id="t1", tool="transfer_to_billing", content="Transferred to billing."
    )
    # the target's persona and model answer the next step, with the whole history
    assert len(triage_model.requests) == 1 and len(billing_model.requests) == 1
    asked = billing_model.requests[0]
    assert asked.system == "You are billing."
    assert [t.name for t in asked.tools] == ["transfer_to_triage"]
    assert [type(m).__name__ for m in asked.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    assert session.state.agent == "billing" and session.agent is billing
    # the session's next run is billing's
    again = await drive(session.run("thanks"))
    assert again.text == "Anything else?" and "agent:handoff" not in types(again.events)
    assert len(billing_model.requests) == 2 and len(triage_model.requests) == 1


async def test_last_user_history_gives_the_target_the_last_user_message_only() -> None:
    triage, _billing, _t, billing_model = pair("last_user")
    session = Session(triage)
    await drive(session.run("I want a refund"))
    assert list(billing_model.requests[0].messages) == [UserMessage(content="I want a refund")]
    assert session.messages[0] == UserMessage(content="I want a refund")
    assert [type(m).__name__ for m in session.messages] == ["UserMessage", "AssistantMessage"]


async def test_summary_history_holds_the_summary_the_source_wrote() -> None:
    billing_model = scripted("Refund sent.")
    triage_model = scripted(
        {"text": "", "tool_calls": [call("transfer_to_billing", "t1")]},
        "The user wants a refund for order 7.",  # the summary request's answer
    )
    billing = Agent(model=billing_model, name="billing")
    triage = Agent(
        model=triage_model, name="triage", handoffs=[Handoff(billing, history="summary")]
    )
    session = Session(triage)
    result = await drive(session.run("refund order 7"))
    handoff = next(e for e in result.events if isinstance(e, AgentHandoff))
    assert handoff.summary == "The user wants a refund for order 7."
    assert list(billing_model.requests[0].messages) == [
        UserMessage(content=f"{SUMMARY_HEADER}\nThe user wants a refund for order 7."),
        UserMessage(content="refund order 7"),
    ]
    assert result.text == "Refund sent."


async def test_a_denied_transfer_is_no_handoff() -> None:
    deny = Rules.from_yaml(
        "default_decision: allow\nrules: [{name: no-billing, tool: transfer_to_billing, "
        "decision: deny}]"
    )
    triage, _billing, _t, billing_model = pair(triage_rules=deny)
    session = Session(triage)
    result = await drive(session.run("I want a refund"))
    assert "agent:handoff" not in types(result.events)
    assert types(result.events)[-2:] == ["loop:denied", "done"]
    assert billing_model.requests == [] and session.state.agent is None
    assert session.agent is triage


async def test_the_first_of_two_transfers_wins() -> None:
    sales = Agent(model=scripted("sales here"), name="sales")
    billing = Agent(model=scripted("billing here"), name="billing")
    triage = Agent(
        model=scripted(
            {
                "text": "",
                "tool_calls": [call("transfer_to_billing", "a"), call("transfer_to_sales", "b")],
            }
        ),
        name="triage",
        handoffs=[billing, sales],
    )
    session = Session(triage)
    result = await drive(session.run("hi"))
    results = {m.call_id: m for m in session.messages if isinstance(m, ToolResultMessage)}
    assert results["a"].content == "Transferred to billing." and not results["a"].is_error
    assert results["b"].is_error
    assert results["b"].content == (
        "Not run: only one handoff per reply, and transfer_to_billing was asked for first."
    )
    handoffs = [e for e in result.events if isinstance(e, AgentHandoff)]
    assert [(h.to, h.call_id) for h in handoffs] == [("billing", "a")]
    assert result.text == "billing here"


async def test_a_cycle_by_name_goes_back() -> None:
    billing_model = scripted({"text": "", "tool_calls": [call("transfer_to_triage", "b1")]})
    triage_model = scripted(
        {"text": "", "tool_calls": [call("transfer_to_billing", "t1")]}, "triage again"
    )
    billing = Agent(model=billing_model, name="billing", handoffs=["triage"])
    triage = Agent(model=triage_model, name="triage", handoffs=[billing])
    result = await drive(Session(triage).run("hi"))
    moves = [(e.from_, e.to) for e in result.events if isinstance(e, AgentHandoff)]
    assert moves == [("triage", "billing"), ("billing", "triage")]
    assert result.text == "triage again"


async def test_an_unknown_target_ends_the_run_with_an_error() -> None:
    triage = Agent(
        model=scripted({"text": "", "tool_calls": [call("transfer_to_nobody", "t1")]}),
        name="triage",
        handoffs=["nobody"],
    )
    result = await drive(Session(triage).run("hi"))
    assert types(result.events)[-2:] == ["loop:error", "done"]
    assert "'nobody', which is no known agent" in result.text


def test_a_target_named_twice_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="named twice"):
        Agent(model="scripted:x", name="t", handoffs=["b", "b"])


async def test_reload_fork_and_snapshot_go_on_with_the_active_agent() -> None:
    triage, billing, _t, billing_model = pair()
    session = Session(triage)
    first = await drive(session.run("I want a refund"))
    # the log folded (the reducer) and a snapshot of it name the active agent
    state = fold(first.events, triage._by_name)
    assert state.agent == "billing" and state.handoff_call == "t1"
    restored = from_snapshot(to_snapshot(state), triage._by_name)
    assert restored.agent == "billing" and restored.handoff_call == "t1"
    # a session made with its first agent from that state (a reload, a fork) runs billing
    reloaded = Session(triage, history=state.history)
    reloaded.state.agent, reloaded.state.handoff_call = state.agent, state.handoff_call
    again = await drive(reloaded.run("thanks"))
    assert "agent:handoff" not in types(again.events)
    assert reloaded.agent is billing and billing_model.requests[-1].system == "You are billing."


def test_an_old_snapshot_without_the_field_has_the_first_agent() -> None:
    state = fold([], {})
    text = to_snapshot(state).replace('"agent":null,"handoffCall":null,', "")
    assert '"agent"' not in text
    assert from_snapshot(text, {}).agent is None


async def test_a_transfer_tool_is_listed_with_the_target_description() -> None:
    _triage, billing, _t, _b = pair()
    triage = Agent(model="scripted:x", name="t2", handoffs=[billing])
    (spec,) = triage.tool_specs
    assert spec.name == "transfer_to_billing"
    assert (
        spec.description == "Hand the conversation over to the billing agent. Refunds and invoices."
    )


async def test_an_asked_transfer_hands_off_once_approved() -> None:
    from loopwright import Approval

    ask = Rules.from_yaml(
        "default_decision: allow\nrules: [{name: billing-asked, tool: transfer_to_billing, "
        "decision: ask}]"
    )
    triage, billing, _t, billing_model = pair(triage_rules=ask)
    session = Session(triage)
    paused = await drive(session.run("I want a refund"))
    assert types(paused.events)[-2:] == ["loop:paused", "done"]
    assert session.state.agent is None and billing_model.requests == []
    [item] = session.pending
    await session.resolve(item.id, Approval.approve(by="me"))
    resumed = await drive(session.resume())
    kinds = types(resumed.events)
    assert kinds[: kinds.index("agent:handoff") + 2] == [
        "session",
        "approval:resolved",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "agent:handoff",  # after the resumed batch, before the next step
        "step:started",
    ]
    assert resumed.text == "Your refund is on its way." and session.agent is billing


async def test_a_reloaded_session_enters_its_targets_live_toolsets() -> None:
    """The first run of a session reloaded after a handoff is made with its first agent, then
    goes on with the target: the target's live toolsets (an MCP server...) are entered by the
    session's owner before its request lists them, as the first agent's would be."""
    from test_toolsets import Growing

    source = Growing()
    billing_model = scripted("Hello.", {"tool_calls": [call("ping", "p1")]}, "Pinged.")
    billing = Agent(model=billing_model, name="billing", tools=[source], handoffs=["triage"])
    triage_model = scripted({"tool_calls": [call("transfer_to_billing", "t1")]})
    triage = Agent(model=triage_model, name="triage", handoffs=[billing])
    session = Session(triage)
    first = await drive(session.run("I want a refund"))
    await session.toolsets.exit_all()  # (the process that ran it is gone)
    assert (source.entered, source.exited) == (1, 1)
    state = fold(first.events, triage._by_name)
    reloaded = Session(triage, history=state.history)
    reloaded.state.agent, reloaded.state.handoff_call = state.agent, state.handoff_call
    again = await drive(reloaded.run("ping, please"))
    assert (source.entered, again.text) == (2, "Pinged.")
    assert source in reloaded.toolsets
