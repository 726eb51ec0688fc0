"""The gate inside the loop: decisions in model order, denial, live approval, pause."""

from __future__ import annotations

import pytest

from conftest import call, run_agent, scripted
from loopwright import DEFER, Agent, Approval, ApprovalRequest, Rules, SessionBusy, tool
from loopwright.approvals import approve_all, deny_all
from loopwright.errors import UnknownPending
from loopwright.messages import ToolResultMessage
from loopwright.testing import types

RULES = Rules.from_yaml("""
default_decision: deny
rules:
  - {name: lookups-free, tool: lookup, decision: allow}
  - {name: refunds-asked, tool: refund, decision: ask}
""")
ran: list[str] = []


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    ran.append(f"lookup {order}")
    return f"order {order}: shipped"


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    ran.append(f"refund {order} {amount:g}")
    return f"refunded {amount:g}"


@tool
def wipe() -> str:
    """Never allowed."""
    ran.append("wipe")
    return "wiped"


def agent(model, **kw):
    ran.clear()
    return Agent(model=model, tools=[lookup, refund, wipe], rules=RULES, **kw)


def after_reply(result):
    """Event types after the first complete reply."""
    names = types(result.events)
    return names[names.index("message:completed") + 1 :]


def first(result, kind):
    return next(e for e in result.events if e.type == kind)


def decisions(result):
    return [(e.tool, e.decision, e.reason) for e in result.events if e.type == "actauth:decision"]


async def test_deny_skips_approved_siblings_and_stops():
    model = scripted({"tool_calls": [call("lookup", "a", order="1"), call("wipe", "b")]}, "unused")
    result = await run_agent(agent(model))
    assert after_reply(result) == [
        "actauth:decision",
        "actauth:decision",
        "tool:output",
        "tool:result",
        "loop:skipped",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:denied",
        "done",
    ]
    assert decisions(result) == [
        ("lookup", "allow", "matched rule 'lookups-free'"),
        ("wipe", "deny", "no rule matched: default decision 'deny'"),
    ]
    assert [e.status_text for e in result.events if e.type == "tool:result"] == [
        "Denied.",
        "Skipped.",
    ]
    assert ran == []
    assert result.stop_reason == "denied"
    assert result.events[-2].denied_tools == ["wipe"]
    assert model.unused == 1


async def test_deny_can_be_told_to_the_model_instead():
    model = scripted({"tool_calls": [call("lookup", "a", order="1"), call("wipe", "b")]}, "ok")
    result = await run_agent(agent(model, on_deny="continue"))
    assert ran == ["lookup 1"]
    assert [m.content for m in model.requests[1].messages if isinstance(m, ToolResultMessage)] == [
        "order 1: shipped",
        "Tool call denied by policy. Reason: no rule matched: default decision 'deny'",
    ]
    assert result.stop_reason == "completed"


async def test_with_on_deny_continue_a_live_denial_closes_the_asks_deferred_before_it():
    """SPEC §5.4: a denial closes the batch's asks (the log skips their items) even when the run
    goes on; an ask after the denial still pauses the run, and allowed calls run."""
    calls = [call("refund", "r1", order="1", amount=1), call("refund", "r2", order="2", amount=2)]
    calls += [call("lookup", "l", order="3"), call("refund", "r3", order="3", amount=3)]
    model = scripted({"tool_calls": calls})
    answers = iter([DEFER, Approval.deny("no"), DEFER])
    result = await run_agent(agent(model, on_deny="continue"), approver=lambda r: next(answers))
    outputs = [(e.id, e.content) for e in result.events if e.type == "tool:output"]
    assert outputs == [
        ("r2", "Tool call denied by user. Reason: matched rule 'refunds-asked' — human denied: no"),
        ("r1", "Skipped: a sibling tool call in this turn (refund) was denied."),
        ("l", "order 3: shipped"),
    ]
    assert [e.name for e in result.events if e.type == "loop:skipped"] == ["refund"]
    paused = first(result, "loop:paused")
    asked = [e.id for e in result.events if e.type == "approval:pending"]
    assert paused.pending_ids == [asked[2]]
    assert (result.stop_reason, ran) == ("paused", ["lookup 3"])


async def test_live_approval_approves():
    model = scripted({"tool_calls": [call("refund", order="7", amount=5)]}, "refunded")
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        seen.append(request)
        return Approval.approve(by="ana")

    result = await run_agent(agent(model), approver=approver)
    assert after_reply(result)[:5] == [
        "approval:pending",
        "pending:requested",
        "approval:resolved",
        "actauth:decision",
        "tool:started",
    ]
    pending = first(result, "approval:pending")
    assert pending.id == seen[0].id and pending.id.startswith("apr_") and len(pending.id) > 20
    assert (pending.reason, pending.scope.agent, pending.scope.tenant) == (
        "matched rule 'refunds-asked'",
        "agent",
        "default",
    )
    assert first(result, "approval:resolved").by == "ana"
    assert decisions(result) == [
        ("refund", "allow", "matched rule 'refunds-asked' — human approved")
    ]
    assert ran == ["refund 7 5"]


async def test_live_approval_denies():
    model = scripted({"tool_calls": [call("refund", order="7", amount=5)]})
    result = await run_agent(agent(model), approver=deny_all)
    assert after_reply(result) == [
        "approval:pending",
        "pending:requested",
        "approval:resolved",
        "actauth:decision",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:denied",
        "done",
    ]
    assert ran == []


async def test_approve_with_edited_arguments():
    model = scripted({"tool_calls": [call("refund", order="7", amount=500)]}, "done")
    result = await run_agent(
        agent(model), approver=lambda r: Approval.approve(args={"order": "7", "amount": 50})
    )
    assert ran == ["refund 7 50"]
    started = next(e for e in result.events if e.type == "tool:started")
    assert started.args == {"order": "7", "amount": 50}
    resolved = next(e for e in result.events if e.type == "approval:resolved")
    assert resolved.args == {"order": "7", "amount": 50}


async def test_invalid_edit_is_refused_and_the_call_stays_pending():
    model = scripted({"tool_calls": [call("refund", order="7", amount=500)]}, "done")
    answers = [
        Approval.approve(args={"order": "7", "amount": "lots"}),
        Approval.approve(args={"order": "7", "amount": 1}),
    ]
    requests: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        requests.append(request)
        return answers.pop(0)

    result = await run_agent(agent(model), approver=approver)
    assert [r.error for r in requests] == [
        None,
        "edited arguments are invalid: amount: Input should be a valid number, unable to "
        "parse string as a number",
    ]
    assert requests[0].id == requests[1].id
    assert ran == ["refund 7 1"]
    assert types(result.events).count("approval:pending") == 1


async def test_no_live_approver_pauses_after_allowed_siblings_run():
    model = scripted(
        {"tool_calls": [call("refund", "r", order="7", amount=5), call("lookup", "l", order="7")]},
        "unused",
    )
    result = await run_agent(agent(model))
    assert after_reply(result) == [
        "approval:pending",
        "pending:requested",
        "actauth:decision",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:paused",
        "done",
    ]
    assert decisions(result)[0] == ("refund", "ask", "matched rule 'refunds-asked'")
    pending_id = first(result, "approval:pending").id
    assert result.pending_ids == [pending_id]
    assert ran == ["lookup 7"]
    assert result.stop_reason == "paused"


async def test_decisions_follow_model_order_and_ask_even_after_a_denial():
    model = scripted(
        {
            "tool_calls": [
                call("wipe", "w"),
                call("refund", "r", order="1", amount=1),
                call("lookup", "l", order="1"),
            ]
        }
    )
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.call.name)
        return Approval.approve()

    result = await run_agent(agent(model), approver=approver)
    assert [d[:2] for d in decisions(result)] == [
        ("wipe", "deny"),
        ("refund", "allow"),
        ("lookup", "allow"),
    ]
    assert asked == ["refund"]
    assert [e.name for e in result.events if e.type == "loop:skipped"] == ["refund", "lookup"]
    assert ran == []


async def test_approve_all_runs_every_asked_call():
    model = scripted({"tool_calls": [call("refund", order="1", amount=2)]}, "ok")
    result = await run_agent(agent(model), approver=approve_all)
    assert ran == ["refund 1 2"] and result.stop_reason == "completed"


async def test_no_rules_allows_every_tool():
    model = scripted({"tool_calls": [call("wipe")]}, "ok")
    result = await run_agent(Agent(model=model, tools=[wipe]))
    assert decisions(result) == [("wipe", "allow", "no rules: allowed")]


async def test_rules_file_is_read_from_a_path(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - {name: no-wipes, tool: wipe, decision: deny}\n")
    model = scripted({"tool_calls": [call("wipe")]})
    result = await run_agent(Agent(model=model, tools=[wipe], rules=path))
    assert decisions(result) == [("wipe", "deny", "matched rule 'no-wipes'")]


async def paused_session(*calls_, **kw):
    from conftest import drive
    from loopwright import Session

    model = scripted({"tool_calls": list(calls_)}, "all done")
    session = Session(agent(model, **kw))
    result = await drive(session.run("go"))
    assert result.stop_reason == "paused"
    return session, model, result


async def test_a_paused_batch_resumes_with_results_in_call_order():
    from conftest import drive

    session, model, _ = await paused_session(
        call("refund", "r1", order="1", amount=5),
        call("lookup", "l", order="1"),
        call("refund", "r2", order="2", amount=7),
    )
    first, second = session.pending
    assert (first.call.id, second.call.id) == ("r1", "r2")
    assert (await session.resolve(first.id, Approval.approve(by="ana"))).outstanding == 1
    with pytest.raises(SessionBusy, match="still has 1 open items"):
        session.resume()
    edit = await session.resolve(second.id, Approval.approve(args={"order": "2", "amount": "x"}))
    assert (edit.status, edit.outstanding) == ("invalid", 1)
    assert edit.error.startswith("edited arguments are invalid: amount")
    assert (
        await session.resolve(second.id, Approval.approve(args={"order": "2", "amount": 3}))
    ).status == "resolved"
    assert (await session.resolve(second.id, Approval.deny())).status == "already_resolved"
    result = await drive(session.resume())
    assert types(result.events)[:9] == [
        "session",
        "approval:resolved",
        "actauth:decision",
        "approval:resolved",
        "actauth:decision",
        "tool:started",
        "tool:started",
        "toollane:result",
        "tool:output",
    ]
    assert ran == ["lookup 1", "refund 1 5", "refund 2 3"]
    assert [m.call_id for m in model.requests[1].messages if isinstance(m, ToolResultMessage)] == [
        "r1",
        "l",
        "r2",
    ]
    assert result.text == "all done" and session.pending == []


async def test_denying_a_pending_item_closes_the_batch():
    from conftest import drive

    session, _model, _ = await paused_session(
        call("refund", "r1", order="1", amount=5), call("refund", "r2", order="2", amount=7)
    )
    first, second = session.pending
    assert (await session.resolve(first.id, Approval.deny("too much", by="bo"))).outstanding == 0
    assert (await session.resolve(second.id, Approval.approve())).status == "already_resolved"
    result = await drive(session.resume())
    assert after_resume(result) == [
        "approval:resolved",
        "actauth:decision",
        "tool:output",
        "tool:result",
        "loop:skipped",
        "tool:output",
        "tool:result",
        "loop:denied",
        "done",
    ]
    assert ran == []
    contents = [m.content for m in session.messages if isinstance(m, ToolResultMessage)]
    assert contents == [
        "Tool call denied by user. Reason: matched rule 'refunds-asked' — human denied: too much",
        "Skipped: a sibling tool call in this turn (refund) was denied.",
    ]


def after_resume(result):
    return types(result.events)[1:]


async def test_a_new_message_is_refused_while_items_are_pending():
    session, _, _ = await paused_session(call("refund", "r1", order="1", amount=5))
    with pytest.raises(SessionBusy, match="paused on pending items"):
        session.run("hello?")
    with pytest.raises(UnknownPending):
        await session.resolve("apr_guess", Approval.approve())


async def test_a_question_is_answered_live():
    from loopwright import Answer
    from loopwright.approvals import QuestionRequest
    from loopwright.tools import ask_user

    asked = []

    def person(request):
        asked.append(request)
        return Answer(text="medium", by="ana")

    model = scripted(
        {
            "tool_calls": [
                call("ask_user", "q", question="Which size?", options=["small", "medium"])
            ]
        },
        "medium it is",
    )
    result = await run_agent(Agent(model=model, tools=[ask_user], rules=RULES), approver=person)
    assert after_reply(result)[:7] == [
        "question:pending",
        "pending:requested",
        "question:resolved",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
    ]
    [request] = asked
    assert isinstance(request, QuestionRequest)
    assert (request.question, request.options, request.agent) == (
        "Which size?",
        ["small", "medium"],
        "agent",
    )
    assert first(result, "question:pending").id == request.id
    assert [m.content for m in model.requests[1].messages if isinstance(m, ToolResultMessage)] == [
        "medium"
    ]


async def test_an_unanswered_question_pauses_and_is_answered_later():
    from conftest import drive
    from loopwright import Answer, Session
    from loopwright.tools import ask_user

    model = scripted(
        {
            "tool_calls": [
                call("ask_user", "q", question="Which size?"),
                call("lookup", "l", order="1"),
            ]
        },
        "thanks",
    )
    session = Session(Agent(model=model, tools=[ask_user, lookup], rules=RULES))
    result = await drive(session.run("go", approver=approve_all))  # approvers don't answer
    assert result.stop_reason == "paused" and ran == ["lookup 1"]
    [question] = session.pending
    wrong = await session.resolve(question.id, Approval.approve())
    assert (wrong.status, wrong.error) == ("invalid", f"{question.id} is a question: answer it")
    assert (await session.resolve(question.id, Answer(text="large"))).outstanding == 0
    resumed = await drive(session.resume())
    assert types(resumed.events)[1:3] == ["question:resolved", "actauth:decision"]
    assert [m.content for m in session.messages if isinstance(m, ToolResultMessage)] == [
        "large",
        "order 1: shipped",
    ]
