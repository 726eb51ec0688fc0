"""A subagent called again with a call id an earlier call of the parent used (the OpenAI dialect
falls back to `call_<index>`): each call gets a child session of its own, `<parent>/<child>/<call
id>` for the first and `…~2` for the next, so a child never sees another call's conversation; a
call suspended on its child finds that child again when the parent resumes, in a new process
too; and a child an earlier call left paused never wedges a later call."""

from __future__ import annotations

from pathlib import Path

from conftest import drive
from loopwright import Agent, Approval, Rules, Session, tool
from loopwright import events as ev
from loopwright.messages import ToolCall, ToolResultMessage, UserMessage
from loopwright.subagents import subagent_tool
from loopwright.testing import FunctionModel, Reply


@tool
def refund(amount: int) -> str:
    """Refund an amount."""
    return f"refunded {amount}"


def child_reply(request) -> Reply:
    """Refunds when asked to (a human approves it), else says what it was told."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"billing: {last.content}")
    if last.content.startswith("refund"):
        amount = int(last.content.split()[1])
        return Reply(tool_calls=(ToolCall(id="r", name="refund", args={"amount": amount}),))
    said = [m.content for m in request.messages if isinstance(m, UserMessage)]
    return Reply(text=f"billing was told {said}")


def parent_reply(request) -> Reply:
    """Passes each user message to billing, always as call_0, then says what billing said."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"support: {last.content}")
    return Reply(
        tool_calls=(ToolCall(id="call_0", name="billing", args={"request": last.content}),)
    )


BILLING = Agent(
    name="billing",
    description="Handles refunds.",
    model=FunctionModel(child_reply),
    tools=[refund],
    rules=Rules.from_yaml("rules: [{name: refunds-asked, tool: refund, decision: ask}]"),
)
SUPPORT = Agent(name="support", model=FunctionModel(parent_reply), tools=[subagent_tool(BILLING)])


def children(result) -> set[str]:
    return {e.origin.session_id for e in result.events if isinstance(e, ev.SubagentEvent)}


def outputs(result) -> list[str]:
    return [e.content for e in result.events if isinstance(e, ev.ToolOutput)]


async def test_each_call_with_a_reused_id_has_a_child_session_of_its_own():
    def reply(request) -> Reply:  # billing twice in one run, both times as call_0
        results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
        if len(results) == 2:
            return Reply(text=" / ".join(results))
        said = ["note the password is hunter2", "what were you told?"][len(results)]
        return Reply(tool_calls=(ToolCall(id="call_0", name="billing", args={"request": said}),))

    parent = Agent(name="support", model=FunctionModel(reply), tools=[subagent_tool(BILLING)])
    result = await drive(Session(parent, session_id="p").run("go"))
    assert children(result) == {"p/billing/call_0", "p/billing/call_0~2"}
    assert result.text == (
        "billing was told ['note the password is hunter2'] / "
        "billing was told ['what were you told?']"
    )


async def test_a_suspended_call_with_a_reused_id_resumes_its_own_child_from_the_log(
    tmp_path: Path,
):
    from loopwright.runtime import open_session
    from loopwright.store import open_log

    log = await open_log(tmp_path / "lw.db")
    try:
        session = await open_session(SUPPORT, log, "p")
        first = await drive(session.run("note the order A-1"))
        assert outputs(first) == ["billing was told ['note the order A-1']"]
        paused = await drive(session.run("refund 5"))
        [suspended] = [e for e in paused.events if isinstance(e, ev.ToolSuspended)]
        assert (suspended.id, suspended.session_id) == ("call_0", "p/billing/call_0~2")
    finally:
        await log.close()
    log = await open_log(tmp_path / "lw.db")  # another process resumes it
    try:
        session = await open_session(SUPPORT, log, "p")
        [item] = session.pending
        assert (item.call.name, item.args) == ("refund", {"amount": 5})
        assert (await session.resolve(item.id, Approval.approve(by="ana"))).status == "resolved"
        done = await drive(session.resume())
        assert children(done) == {"p/billing/call_0~2"}
        assert outputs(done) == ["billing: refunded 5"]
        assert done.text == "support: billing: refunded 5"
        third = await drive(session.run("what were you told?"))
        assert children(third) == {"p/billing/call_0~3"}
        assert outputs(third) == ["billing was told ['what were you told?']"]
    finally:
        await log.close()


async def test_a_child_an_earlier_call_left_paused_does_not_wedge_a_later_call(tmp_path: Path):
    """The earlier call was skipped (a sibling's denial closed its batch): its child stays
    paused; a later call with its id runs in a child of its own."""
    from loopwright.runtime import open_session
    from loopwright.store import open_log

    @tool
    def notify(who: str) -> str:
        """Notify someone."""
        return "notified"

    def reply(request) -> Reply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return Reply(text=f"support: {last.content}")
        calls = (ToolCall(id="call_0", name="billing", args={"request": last.content}),)
        if last.content.startswith("refund"):
            calls += (ToolCall(id="call_1", name="notify", args={"who": "boss"}),)
        return Reply(tool_calls=calls)

    rules = Rules.from_yaml(
        "default_decision: allow\nrules: [{name: ask-notify, tool: notify, decision: ask}]"
    )
    parent = Agent(
        name="support",
        model=FunctionModel(reply),
        tools=[subagent_tool(BILLING), notify],
        rules=rules,
    )
    log = await open_log(tmp_path / "lw.db")
    try:
        session = await open_session(parent, log, "p")
        await drive(session.run("refund 1000"))
        [own] = [p for p in session.pending if p.call.name == "notify"]
        await session.resolve(own.id, Approval.deny("no", by="ana"))
        denied = await drive(session.resume())
        assert denied.stop_reason == "denied" and session.pending == []
        later = await drive(session.run("what is the weather?"))
        assert later.stop_reason == "completed"
        assert children(later) == {"p/billing/call_0~2"}
        assert later.text == "support: billing was told ['what is the weather?']"
    finally:
        await log.close()
