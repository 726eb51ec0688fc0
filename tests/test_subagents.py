"""Subagents: a child agent as its parent's tool, its events forwarded with their origin, its
approvals asked of the same human, cancellation passed down."""

from __future__ import annotations

import asyncio
import dataclasses

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


async def test_a_child_whose_answer_was_cut_gives_the_parent_its_text():
    """A child ending `max_tokens` answers the parent's call as before (the cut text, no error):
    the parent's model sees what was said and the parent's run completes."""
    child = billing({"text": "Refund of 5 is iss", "stop_reason": "max_tokens"})
    parent_model = scripted({"tool_calls": [call("billing", "b", request="refund")]}, "done")
    result = await run_agent(Agent(model=parent_model, tools=[subagent_tool(child)]))
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert (output.content, output.is_error) == ("Refund of 5 is iss", False)
    assert (result.text, result.stop_reason) == ("done", "completed")


class SaysOneWord:
    """A model that streams one word, then waits until its request is cancelled."""

    name = "one-word"

    async def stream(self, request):
        from loopwright.events import TextDelta

        yield TextDelta(delta="slowly")
        await asyncio.Event().wait()


async def test_cancelling_the_parent_cancels_the_child():
    child = dataclasses.replace(billing(), model=SaysOneWord())
    parent = Agent(
        model=scripted({"tool_calls": [call("billing", "b", request="go")]}),
        tools=[subagent_tool(child)],
    )
    session = Session(parent)
    events = []
    async with asyncio.timeout(60):  # a safety net: only the cancel can end the child
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


def write_support_project(tmp_path) -> None:
    import textwrap

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


def test_a_subagents_approval_is_answered_at_the_terminal(tmp_path):
    """Through the real CLI: the child's approval reaches the prompt, and the parent finishes."""
    import os
    import subprocess

    from test_cli import ENV, LOOPWRIGHT, shown, terminal

    write_support_project(tmp_path)
    with terminal() as (keyboard, tty):
        proc = subprocess.Popen(
            [LOOPWRIGHT, "run", "support", "--project", str(tmp_path), "go"],
            cwd=tmp_path,
            env=ENV,
            stdin=tty,
            stdout=subprocess.PIPE,
            stderr=tty,
            text=True,
        )
        os.write(keyboard, b"a\n")
        out, _ = proc.communicate(timeout=30)
        err = shown(keyboard)
    assert proc.returncode == 0, err
    assert out.strip() == "All sorted."
    assert "the subagent billing needs you" in err and "refund" in err


# ---- a subagent paused with nobody to answer live: the parent pauses too ----------------------


def support_with_billing(child: Agent, *parent_replies) -> Agent:
    replies = parent_replies or (
        {"tool_calls": [call("billing", "b", request="refund 5 please")]},
        "Billing says it is done.",
    )
    return Agent(name="support", model=scripted(*replies), tools=[subagent_tool(child)])


async def test_a_paused_subagent_pauses_its_parent_and_resumes_with_it():
    child = billing({"tool_calls": [call("refund", "r", amount=5)]}, "Refund of 5 done.")
    session = Session(support_with_billing(child), session_id="p1")
    paused = await drive(session.run("refund me"))
    assert paused.stop_reason == "paused"
    [item] = session.pending  # the child's approval is the parent's pending item
    assert (item.call.name, item.args) == ("refund", {"amount": 5})
    [suspended] = [e for e in paused.events if e.type == "tool:suspended"]
    assert (suspended.id, suspended.session_id, suspended.pending_ids) == (
        "b",
        "p1/billing/b",
        [item.id],
    )
    assert paused.pending_ids == [item.id]
    assert types(paused.events)[-4:] == ["tool:suspended", "step:finished", "loop:paused", "done"]
    assert not [e for e in paused.events if e.type == "tool:output"]  # the call has no result

    resolution = await session.resolve(item.id, Approval.approve(by="ana"))
    assert (resolution.status, resolution.outstanding) == ("resolved", 0)
    assert session.pending == []
    done = await drive(session.resume())
    assert done.text == "Billing says it is done."
    assert types(done.events)[:4] == [
        "session",
        "actauth:decision",
        "tool:started",
        "subagent:event",
    ]
    inner = [e.event.type for e in done.events if e.type == "subagent:event"]
    assert inner[:3] == ["session", "approval:resolved", "actauth:decision"]
    assert "tool:suspended" not in types(done.events)
    outputs = [(e.id, e.content) for e in done.events if e.type == "tool:output"]
    assert outputs == [("b", "Refund of 5 done.")]
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    child_session = session._children["p1/billing/b"]
    assert [m.role for m in child_session.messages] == [
        "user", "assistant", "tool", "assistant"
    ]  # fmt: skip


async def test_a_denial_inside_a_paused_subagent_gives_the_parent_an_error_result():
    child = billing({"tool_calls": [call("refund", "r", amount=5)]})
    session = Session(support_with_billing(child, *(
        {"tool_calls": [call("billing", "b", request="refund")]}, "I could not refund it."
    )))  # fmt: skip
    await drive(session.run("go"))
    [item] = session.pending
    await session.resolve(item.id, Approval.deny("too much", by="ana"))
    done = await drive(session.resume())
    [output] = [e for e in done.events if e.type == "tool:output"]
    assert output.is_error and output.content.startswith("The subagent 'billing' stopped (denied)")
    assert done.text == "I could not refund it."


async def test_resuming_while_the_subagent_still_waits_is_refused():
    from loopwright import SessionBusy

    child = billing({"tool_calls": [call("refund", "r", amount=5)]}, "ok")
    session = Session(support_with_billing(child))
    await drive(session.run("go"))
    with pytest.raises(SessionBusy, match="1 open items"):
        session.resume()


async def test_a_durable_subagent_pause_is_resolved_and_resumed_from_a_fresh_process(tmp_path):
    """Pause, drop everything, then (as another process would) resolve the child's item by id
    through a runtime, which resumes the top-level session from the log alone."""
    from loopwright.errors import UnknownPending
    from loopwright.runtime import Runtime, open_session
    from loopwright.store import SessionKey, open_log
    from runtime_fixtures import ended

    def agents(*, resumed=False):  # a fresh process builds its agents again
        if resumed:  # (scripted models: only the replies still to come)
            child = billing("Refund of 5 done.")
            return {"support": support_with_billing(child, "Billing says it is done.")}
        child = billing({"tool_calls": [call("refund", "r", amount=5)]})
        return {"support": support_with_billing(child)}

    db = tmp_path / "lw.db"
    log = await open_log(db)
    first = await open_session(agents()["support"], log, "s1", tenant="acme")
    paused = await drive(first.run("refund me"))
    assert paused.stop_reason == "paused"
    await log.close()

    log = await open_log(db)
    runtime = Runtime(agents(resumed=True), log)
    root, child = SessionKey("acme", "support", "s1"), SessionKey("acme", "billing", "s1/billing/b")
    [row] = await runtime.pending("acme")
    assert (row.session_id, row.agent, row.tool, row.status) == (
        "s1/billing/b", "billing", "refund", "open"
    )  # fmt: skip
    assert (await log.session(root)).status == "paused"
    assert (await log.session(child)).parent == root
    reopened = await runtime.open(root)
    assert [p.id for p in reopened.pending] == [row.id]  # the log knows the parent waits on it
    with pytest.raises(UnknownPending, match="no pending item"):
        await runtime.resolve("other", row.id, Approval.approve())  # a foreign tenant's id

    bad = await runtime.resolve("acme", row.id, Approval.approve({"amount": "x"}))
    assert (bad.status, bad.root) == ("invalid", root)  # validated against the child's tool
    assert [p.id for p in bad.outstanding] == [row.id]
    good = await runtime.resolve("acme", row.id, Approval.approve(by="ana"))
    assert (good.status, good.outstanding) == ("resumed", []) and good.run is not None
    done = await ended(good.run)
    assert done.text == "Billing says it is done."
    assert [(e.id, e.content) for e in good.run.items if e.type == "tool:output"] == [
        ("b", "Refund of 5 done.")
    ]
    assert (await log.session(root)).status == "idle"
    assert (await log.session(child)).status == "idle"
    assert (await log.pending_item("acme", row.id)).status == "approved"
    parent_log = [s.event.type for s in await log.read(root)]
    assert parent_log.count("tool:suspended") == 1 and parent_log.count("tool:output") == 1
    child_log = [s.event.type for s in await log.read(child)]
    assert child_log.count("approval:pending") == 1 and child_log.count("tool:result") == 1
    again = await open_session(agents()["support"], log, "s1", tenant="acme")
    assert [m.role for m in again.messages] == ["user", "assistant", "tool", "assistant"]
    await runtime.close()
    await log.close()


def test_a_subagents_approval_is_resolved_from_a_second_process(tmp_path):
    """Through the real CLI without a terminal: the parent pauses on the child's approval, and
    `loopwright approvals approve ID` in another process resumes the parent, which finishes."""
    import getpass
    import json
    import re
    import subprocess

    from test_cli import ENV, LOOPWRIGHT

    write_support_project(tmp_path)
    cli = [LOOPWRIGHT]
    where = ["--project", str(tmp_path)]
    first = subprocess.run(
        [*cli, "run", "support", *where, "--new", "--session", "s1", "go"],
        env=ENV, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert first.returncode == 3, first.stderr
    [item_id] = re.findall(r"approval (apr_\S+) \(subagent billing\): refund", first.stderr)
    assert f"loopwright approvals approve {item_id}" in first.stderr

    shown = subprocess.run(
        [*cli, "sessions", "show", "s1", *where], env=ENV, capture_output=True, text=True
    )
    assert f"  ‖ billing waits on {item_id} (session s1/billing/call_1)\n" in shown.stdout

    listed = subprocess.run(
        [*cli, "approvals", "list", *where, "--json"], env=ENV, capture_output=True, text=True
    )
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (row["id"], row["session_id"], row["agent"], row["tool"], row["args"]) == (
        item_id, "s1/billing/call_1", "billing", "refund", {"amount": 5}
    )  # fmt: skip

    second = subprocess.run(
        [*cli, "approvals", "approve", item_id, *where, "--by", "ana"],
        env=ENV, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "All sorted."
    assert f"{item_id}: approved (approval: refund) by {getpass.getuser()}" in second.stderr
    assert "resuming session s1" in second.stderr

    shown = subprocess.run(
        [*cli, "sessions", "list", *where, "--json"], env=ENV, capture_output=True, text=True
    )
    status = {s["id"]: s["status"] for s in map(json.loads, shown.stdout.splitlines())}
    assert status == {"s1": "idle", "s1/billing/call_1": "idle"}


async def test_a_subagents_question_is_answered_through_the_parent():
    from loopwright import Answer
    from loopwright.approvals import QuestionRequest
    from loopwright.tools import ask_user

    child = Agent(
        name="billing",
        description="Handles refunds.",
        model=scripted(
            {"tool_calls": [call("ask_user", "q", question="Which order?", options=["A", "B"])]},
            "Refunded order B.",
        ),
        tools=[ask_user],
    )
    session = Session(support_with_billing(child, *(
        {"tool_calls": [call("billing", "b", request="refund my order")]}, "Done: order B."
    )), session_id="p")  # fmt: skip
    paused = await drive(session.run("go"))
    [question] = session.pending
    assert isinstance(question, QuestionRequest)
    assert (question.question, question.options, question.session_id) == (
        "Which order?", ["A", "B"], "p/billing/b"
    )  # fmt: skip
    assert paused.pending_ids == [question.id]
    wrong = await session.resolve(question.id, Approval.approve())
    assert wrong.status == "invalid" and "question" in (wrong.error or "")
    answered = await session.resolve(question.id, Answer(text="B", by="ana"))
    assert (answered.status, answered.outstanding) == ("resolved", 0)
    done = await drive(session.resume())
    assert done.text == "Done: order B."
    inner = [e.event for e in done.events if e.type == "subagent:event"]
    assert [e.answer for e in inner if e.type == "question:resolved"] == ["B"]


@pytest.mark.parametrize("durable", [False, True])
async def test_denying_the_parents_own_item_closes_the_batch_with_its_subagents_items(
    tmp_path, durable
):
    """One batch: the parent's own call waits for approval, its subagent's call waits on the
    child's approval. Denying the parent's item closes the batch at once: the child's item is
    skipped with it, nothing is left open, and the resumed run skips the subagent's call."""
    from loopwright.runtime import Runtime, open_session
    from loopwright.store import open_log

    child = billing({"tool_calls": [call("refund", "r", amount=5)]}, "never")
    rules = Rules.from_yaml(
        "rules: [{name: refunds-asked, tool: refund, decision: ask},"
        " {name: billing-ok, tool: billing, decision: allow}]"
    )
    parent = Agent(
        name="support",
        model=scripted(
            {"tool_calls": [call("refund", "own", amount=9), call("billing", "b", request="x")]}
        ),
        tools=[refund, subagent_tool(child)],
        rules=rules,
    )
    log = await open_log(tmp_path / "lw.db") if durable else None
    session = await open_session(parent, log, "s1") if log else Session(parent, session_id="s1")
    paused = await drive(session.run("go"))
    own, nested = session.pending
    assert (own.call.id, nested.call.id) == ("own", "r")
    assert paused.pending_ids == [own.id, nested.id]
    if log:  # another process records the denial; the session resumes here
        runtime = Runtime({"support": parent}, log)
        closed = await runtime.resolve(
            "default", own.id, Approval.deny("no", by="ana"), resume=False
        )
        assert (closed.status, closed.outstanding) == ("waiting", [])  # nothing left open
        assert (await log.pending_item("default", nested.id)).status == "skipped"
        session = await open_session(parent, log, "s1")
    else:
        denied = await session.resolve(own.id, Approval.deny("no", by="ana"))
        assert (denied.status, denied.outstanding) == ("resolved", 0)
    done = await drive(session.resume())
    assert done.stop_reason == "denied"
    assert [(e.type, e.name) for e in done.events if e.type == "loop:skipped"] == [
        ("loop:skipped", "billing")
    ]
    assert "subagent:event" not in types(done.events)  # the child is never resumed
    results = {e.id: e.status_text for e in done.events if e.type == "tool:result"}
    assert results == {"own": "Denied.", "b": "Skipped."}
    if log:
        await log.close()


async def test_a_parent_keeps_only_the_subagent_sessions_it_waits_on():
    """Finished subagent sessions are not kept in memory from one run to the next."""
    child = billing("Refund of 5 done.")
    session = Session(
        support_with_billing(
            child,
            {"tool_calls": [call("billing", "b", request="refund 5")]},
            "Billing says it is done.",
            "You are welcome.",
        )
    )
    await drive(session.run("refund me", approver=lambda r: Approval.approve()))
    assert list(session._children) == [f"{session.id}/billing/b"]  # during and right after
    done = await drive(session.run("thanks"))
    assert (done.text, session._children) == ("You are welcome.", {})
