"""A running call that needs a person's answer (`NeedsAnswer`): the run pauses on a question of
the call's own, and once it is answered the call runs again from the start with the answer in
`ToolContext.answers` — in a session in memory, and from the log in another runtime."""

from __future__ import annotations

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Answer, Session, tool
from loopwright.approvals import QuestionRequest
from loopwright.messages import ToolResultMessage
from loopwright.state.replay import fold
from loopwright.state.snapshots import from_snapshot, to_snapshot
from loopwright.testing import types
from loopwright.tools import NeedsAnswer, ToolContext
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import ended, logged

SIZE = "Which size?"
COLOUR = "Which colour?"
runs: list[dict[str, str]] = []


@tool
def order_shirt(ctx: ToolContext) -> str | NeedsAnswer:
    """Order a shirt, asking the person what it needs to know."""
    runs.append(dict(ctx.answers))
    if SIZE not in ctx.answers:
        return NeedsAnswer(SIZE, ["small", "large"])
    if COLOUR not in ctx.answers:
        return NeedsAnswer(COLOUR)
    return f"ordered a {ctx.answers[SIZE]} {ctx.answers[COLOUR]} shirt"


@tool
async def order_async(ctx: ToolContext) -> str | NeedsAnswer:
    """The same question from an async tool."""
    runs.append(dict(ctx.answers))
    return f"size {ctx.answers[SIZE]}" if SIZE in ctx.answers else NeedsAnswer(SIZE)


def shirt_agent(tool_name: str = "order_shirt") -> Agent:
    runs.clear()
    model = scripted({"tool_calls": [call(tool_name, "c1")]}, "done")
    return Agent(name="shop", model=model, tools=[order_shirt, order_async])


PAUSED = [
    "tool:started",
    "question:pending",
    "pending:requested",
    "tool:suspended",
    "step:finished",
    "loop:paused",
    "done",
]
RERUN = ["session", "question:resolved", "actauth:decision", "tool:started"]


def after_start(events):
    names = types(events)
    return names[names.index("tool:started") :]


@pytest.mark.parametrize("name", ["order_shirt", "order_async"])
async def test_a_call_pauses_on_its_question_and_runs_again_with_the_answer(name):
    session = Session(shirt_agent(name))
    paused = await drive(session.run("a shirt please"))
    assert (paused.stop_reason, after_start(paused.events)) == ("paused", PAUSED)
    [question] = session.pending
    assert isinstance(question, QuestionRequest)
    assert (question.question, question.call.id) == (SIZE, "c1")
    asked = next(e for e in paused.events if e.type == "question:pending")
    suspended = next(e for e in paused.events if e.type == "tool:suspended")
    assert (suspended.session_id, suspended.pending_ids) == (session.id, [question.id])
    assert asked.id == question.id and asked.options == (
        ["small", "large"] if name == "order_shirt" else None
    )
    assert (await session.resolve(question.id, Answer(text="large"))).outstanding == 0
    resumed = await drive(session.resume())
    reason = next(e for e in resumed.events if e.type == "actauth:decision").reason
    assert reason == "resumed: its question was answered"
    assert types(resumed.events)[:4] == RERUN
    assert runs == [{}, {SIZE: "large"}]
    if name == "order_async":
        assert resumed.text == "done" and results(session) == ["size large"]
    else:  # its second question
        assert resumed.stop_reason == "paused" and session.pending[0].question == COLOUR


async def test_each_question_of_a_call_is_asked_once_and_every_answer_replayed():
    session = Session(shirt_agent())
    first = await drive(session.run("a shirt please"))
    [size] = session.pending
    await session.resolve(size.id, Answer(text="large"))
    again = await drive(session.resume())
    # the same call, its second question (a resumed batch is outside any step)
    assert after_start(again.events) == [n for n in PAUSED if n != "step:finished"]
    [colour] = session.pending
    assert (colour.question, colour.call.id) == (COLOUR, "c1") and colour.id != size.id
    await session.resolve(colour.id, Answer(text="red", by="ana"))
    done = await drive(session.resume())
    assert done.text == "done"
    assert runs == [{}, {SIZE: "large"}, {SIZE: "large", COLOUR: "red"}]
    assert results(session) == ["ordered a large red shirt"]
    # the log's fold gives the same history
    log = [*first.events, *again.events, *done.events]
    assert fold(log, {}).history.messages == session.messages


async def test_a_snapshot_taken_between_two_questions_keeps_the_first_answer():
    session = Session(shirt_agent())
    first = await drive(session.run("a shirt please"))
    [size] = session.pending
    await session.resolve(size.id, Answer(text="small"))
    second = await drive(session.resume())
    tools = {"order_shirt": order_shirt}
    state = from_snapshot(to_snapshot(fold([*first.events, *second.events], tools)), tools)
    assert state.batch is not None and state.batch.answers == {size.id: "small"}


async def test_the_call_resumes_from_the_log_in_another_runtime(logs, runtimes):
    log = await logs()
    here = runtimes({"shop": shirt_agent()}, log)
    await ended(await here.send("acme", "shop", "s1", "a shirt please"))
    [size] = await here.pending("acme")
    assert (size.kind, size.tool, size.call_id) == ("question", "order_shirt", "c1")
    await here.close()
    elsewhere = runtimes({"shop": shirt_agent()}, await logs())  # another process, one file
    resolved = await elsewhere.resolve("acme", size.id, Answer(text="large", by="ann"))
    assert resolved.run is not None and (await ended(resolved.run)).stop_reason == "paused"
    [colour] = await elsewhere.pending("acme")
    assert (colour.args["question"], colour.tool) == (COLOUR, "order_shirt")
    resolved = await elsewhere.resolve("acme", colour.id, Answer(text="blue", by="ann"))
    assert resolved.run is not None and (await ended(resolved.run)).text == "done"
    assert runs == [{SIZE: "large"}, {SIZE: "large", COLOUR: "blue"}]  # (this process's runs)
    from loopwright.store.log import SessionKey

    names = await logged(log, SessionKey("acme", "shop", "s1"))
    assert names.count("question:pending") == 2 and names.count("tool:suspended") == 2
    assert names.count("question:resolved") == 2 and names[-2:] == ["loop:done", "done"]


@tool
def deploy(token: str, ctx: ToolContext) -> str | NeedsAnswer:
    """Deploy with a token, asking where."""
    runs.append({"token": token, **ctx.answers})
    return f"deployed to {ctx.answers[SIZE]}" if SIZE in ctx.answers else NeedsAnswer(SIZE)


async def test_a_call_whose_secret_the_log_redacted_is_not_run_again_from_the_log(logs, runtimes):
    """Read back from the log, a suspended call's arguments hold the redaction mark where its
    secret was (P11): it is denied with the reason, never run again on the mark."""
    secret = "sk-" + "a1" * 12
    model = scripted({"tool_calls": [call("deploy", "d1", token=secret)]}, "done")
    agent = Agent(name="ops", model=model, tools=[deploy])
    runs.clear()
    here = runtimes({"ops": agent}, await logs())
    first = await here.send("acme", "ops", "s1", "deploy")  # (its stream holds the secret)
    assert (await first.wait()).stop_reason == "paused"  # type: ignore[union-attr]
    [asked] = await here.pending("acme")
    await here.close()
    elsewhere = runtimes({"ops": agent}, await logs())  # another process, one file
    resolved = await elsewhere.resolve("acme", asked.id, Answer(text="eu"))
    assert resolved.run is not None and (await resolved.run.wait()) is not None
    assert runs == [{"token": secret}]  # the first run only
    assert (await ended(resolved.run)).stop_reason == "denied"
    decision = [e for e in resolved.run.items if e.type == "actauth:decision"][-1]
    assert (decision.decision, decision.reason) == (
        "deny",
        "not resumed: its arguments held a secret the log does not keep ('[redacted]')",
    )


def results(session: Session) -> list[str]:
    return [m.content for m in session.messages if isinstance(m, ToolResultMessage)]


async def test_a_denied_sibling_closes_the_question_and_the_call_is_skipped():
    from loopwright import Approval, Rules

    @tool
    def refund(amount: int) -> str:
        """Refund."""
        return f"refunded {amount}"

    runs.clear()
    model = scripted(
        {"tool_calls": [call("order_shirt", "c1"), call("refund", "c2", amount=5)]}, "ok"
    )
    rules = Rules.from_yaml(
        "rules: [{name: rule-1, tool: refund, decision: ask}]\ndefault_decision: allow"
    )
    session = Session(Agent(name="shop", model=model, tools=[order_shirt, refund], rules=rules))
    paused = await drive(session.run("go"))
    assert paused.stop_reason == "paused"
    approval, question = session.pending
    assert (approval.call.id, question.call.id) == ("c2", "c1")
    await session.resolve(approval.id, Approval.deny("no refunds"))
    assert session.pending == []
    resumed = await drive(session.resume())
    assert resumed.stop_reason == "denied" and runs == [{}]  # it never ran again
    assert results(session) == [
        "Skipped: a sibling tool call in this turn (refund) was denied.",
        "Tool call denied by user. Reason: matched rule 'rule-1' — human denied: no refunds",
    ]
