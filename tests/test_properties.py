"""Property tests: whatever the model asks for and however humans answer, every stream obeys
the event grammar and the history stays valid for every provider."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_history_valid, drive
from long_run import examples
from loopwright import Agent, Approval, Rules, Session, tool
from loopwright.messages import ToolResultMessage
from loopwright.testing import ScriptedModel

RULES = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: no-drop, tool: drop, decision: deny}
  - {name: ask-pay, tool: pay, decision: ask}
""")


@tool
def ok(n: int) -> str:
    """Fine."""
    return f"ok {n}"


@tool
def fail(n: int) -> str:
    """Raises."""
    raise RuntimeError(f"fail {n}")


@tool
async def slow(n: int) -> str:
    """Awaits."""
    await asyncio.sleep(0)
    return f"slow {n}"


@tool
def drop(n: int) -> str:
    """Denied by rule."""
    return "dropped"


@tool
def pay(n: int) -> str:
    """Asked about."""
    return f"paid {n}"


names = st.sampled_from(["ok", "fail", "slow", "drop", "pay", "ghost"])
arguments = st.one_of(st.builds(lambda n: {"n": n}, st.integers(0, 9)), st.just({"n": "x"}))
calls = st.lists(st.tuples(names, arguments), min_size=0, max_size=4)
replies = st.lists(calls, min_size=1, max_size=4)
answers = st.lists(
    st.sampled_from(["approve", "deny", "edit", "bad-edit", "defer"]), min_size=8, max_size=8
)


def script(batches: list[list[tuple[str, dict]]]) -> ScriptedModel:
    entries = []
    for b, batch in enumerate(batches):
        tool_calls = [
            {"name": name, "args": args, "id": f"c{b}_{i}"} for i, (name, args) in enumerate(batch)
        ]
        entries.append(
            {"text": f"step {b}", "tool_calls": tool_calls}
            if tool_calls
            else {"text": f"final {b}"}
        )
    return ScriptedModel.from_script([*entries, "the end"])


@settings(
    max_examples=examples(quick=20, long=500),
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    batches=replies,
    answers=answers,
    on_deny=st.sampled_from(["stop", "continue"]),
    max_turns=st.integers(1, 5),
)
def test_any_script_keeps_the_grammar_and_a_valid_history(batches, answers, on_deny, max_turns):
    queue = list(answers)

    def approver(request):
        answer = queue.pop(0) if queue else "approve"
        if answer == "defer":
            from loopwright import DEFER

            return DEFER
        if answer == "edit":
            return Approval.approve(args={"n": 7})
        if answer == "bad-edit":
            return Approval.approve(args={"n": "seven"})
        return Approval(approved=answer == "approve")

    async def scenario():
        agent = Agent(
            model=script(batches),
            tools=[ok, fail, slow, drop, pay],
            rules=RULES,
            on_deny=on_deny,
            max_turns=max_turns,
        )
        session = Session(agent)
        result = await drive(session.run("go", approver=approver))
        if result.stop_reason == "paused":
            for request in session.pending:
                await session.resolve(request.id, Approval.approve())
            result = await drive(session.resume(approver=approver))
        assert result.stop_reason in {"completed", "denied", "max_turns", "paused"}
        messages = session.messages
        if session.state.checkpoint is not None:  # paused again: that reply waits
            messages = messages[:-1]
        assert_history_valid(messages)
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        assert len({m.call_id for m in results}) == len(results)

    asyncio.run(scenario())
