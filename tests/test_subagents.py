"""Subagents: a child agent as its parent's tool, its events forwarded with their origin, its
approvals asked of the same human, cancellation passed down."""

from __future__ import annotations

import asyncio

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, Approval, ConfigError, Rules, Session, tool
from loopwright.subagents import subagent_tool
from loopwright.testing import types


@tool
def refund(amount: float) -> str:
    """Refund an amount."""
    return f"refunded {amount:g}"


def billing(*replies, **kw) -> Agent:
    rules = Rules.from_yaml("rules: [{name: refunds-asked, tool: refund, decision: ask}]")
    return Agent(
        name="billing",
        description="Handles refunds and invoices.",
        model=scripted(*replies),
        tools=[refund],
        rules=rules,
        **kw,
    )


async def test_a_subagent_is_a_tool_whose_events_reach_the_parent():
    child = billing({"tool_calls": [call("refund", "r", amount=5)]}, "Refund of 5 done.")
    parent_model = scripted(
        {"tool_calls": [call("billing", "b", request="refund 5 please")]},
        "Billing says it is done.",
    )
    parent = Agent(name="support", model=parent_model, tools=[subagent_tool(child)])
    asked = []

    def human(request):
        asked.append(request.call.name)
        return Approval.approve(by="ana")

    result = await drive(Session(parent, session_id="p1").run("refund me", approver=human))
    assert result.text == "Billing says it is done."
    assert asked == ["refund"]  # the child's approval went to the parent's human
    forwarded = [e for e in result.events if e.type == "subagent:event"]
    assert {(e.origin.agent, e.origin.session_id, e.origin.call_id) for e in forwarded} == {
        ("billing", "p1/billing/b", "b")
    }
    inner = [e.event.type for e in forwarded]
    assert inner[0] == "session" and inner[-1] == "done" and "approval:pending" in inner
    outputs = [e.content for e in result.events if e.type == "tool:output"]
    assert outputs == ["Refund of 5 done."]
    assert parent_model.requests[0].tools[0].name == "billing"
    assert parent_model.requests[0].tools[0].parameters["required"] == ["request"]


async def test_a_child_that_is_denied_gives_the_parent_an_error_result():
    child = billing({"tool_calls": [call("refund", "r", amount=5)]})
    parent_model = scripted({"tool_calls": [call("billing", "b", request="refund")]}, "sorry")
    parent = Agent(model=parent_model, tools=[subagent_tool(child)])
    result = await run_agent(parent, approver=lambda r: Approval.deny("no"))
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert output.is_error and output.content.startswith("The subagent 'billing' stopped (denied)")


async def test_cancelling_the_parent_cancels_the_child():
    child = billing({"text": "slowly " * 50, "chunk": 1, "delay": 0.01})
    parent = Agent(
        model=scripted({"tool_calls": [call("billing", "b", request="go")]}),
        tools=[subagent_tool(child)],
    )
    session = Session(parent)
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "subagent:event" and event.event.type == "text:delta":
            session.cancel()
    from conftest import verify

    verify(events)
    inner = [e.event.type for e in events if e.type == "subagent:event"]
    assert "done" not in inner  # the child was cut off mid-reply...
    assert types(events)[-2:] == ["loop:aborted", "done"]  # ...and the parent ended cleanly
    tool_result = next(e for e in events if e.type == "tool:result")
    assert tool_result.status_text == "Error."  # the call is marked interrupted


def test_a_subagent_needs_a_description():
    with pytest.raises(ConfigError, match="needs a description"):
        subagent_tool(Agent(name="quiet", model=scripted()))


async def test_subagent_folders_become_tools(tmp_path):
    import textwrap

    from loopwright.project import load_project

    files = {
        "agents/support/agent.yaml": "model: scripted:script.yaml\n",
        "agents/support/script.yaml": textwrap.dedent("""\
            replies:
              - tool_calls: [{name: billing, args: {request: "invoice 7"}}]
              - text: done
            """),
        "agents/support/subagents/billing/agent.yaml": (
            "description: Handles invoices.\nmodel: scripted:script.yaml\n"
        ),
        "agents/support/subagents/billing/script.yaml": 'replies: ["Invoice 7 sent."]\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    support = load_project(tmp_path).agent("support")
    assert [t.name for t in support.tools] == ["billing"]
    result = await drive(Session(support).run("send invoice 7"))
    assert [e.content for e in result.events if e.type == "tool:output"] == ["Invoice 7 sent."]
    await asyncio.sleep(0)


def test_a_subagents_approval_is_answered_at_the_terminal(tmp_path):
    """Through the real CLI: the child's approval reaches the prompt, and the parent finishes."""
    import os
    import subprocess
    import textwrap

    from test_cli import ENV, LOOPWRIGHT, terminal

    files = {
        "agents/support/agent.yaml": "model: scripted:script.yaml\n",
        "agents/support/script.yaml": textwrap.dedent("""\
            replies:
              - tool_calls: [{name: billing, args: {request: "refund 5"}}]
              - text: "All sorted."
            """),
        "agents/support/subagents/billing/agent.yaml": (
            "description: Handles refunds.\nmodel: scripted:script.yaml\n"
        ),
        "agents/support/subagents/billing/script.yaml": textwrap.dedent("""\
            replies:
              - tool_calls: [{name: refund, args: {amount: 5}}]
              - text: "Refunded 5."
            """),
        "agents/support/subagents/billing/tools.py": textwrap.dedent("""\
            from loopwright import tool

            @tool
            def refund(amount: float) -> str:
                \"\"\"Refund.\"\"\"
                return f"refunded {amount:g}"
            """),
        "agents/support/subagents/billing/rules.yaml": (
            "rules: [{name: refunds-asked, tool: refund, decision: ask}]\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    with terminal() as (keyboard, tty):
        proc = subprocess.Popen(
            [LOOPWRIGHT, "run", "support", "--project", str(tmp_path), "go"],
            cwd=tmp_path,
            env=ENV,
            stdin=tty,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(keyboard, b"a\n")
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == "All sorted."
    assert "the subagent billing needs you" in err and "refund" in err
