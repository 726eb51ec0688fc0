"""The reducer (`loopwright.state.replay`) at its edges: a paused call whose tool no longer exists,
snapshots it did not write, an approved call that suspends, a cancel while a reply is committed.
(The property that the state folded from the log is the live state is in
test_replay_property.py.)"""

from __future__ import annotations

import asyncio

import pytest

from loopwright import events as ev
from loopwright import tool
from loopwright.messages import AssistantMessage, UserMessage
from loopwright.state.replay import continued, fold
from loopwright.state.snapshots import from_snapshot, to_snapshot
from loopwright.testing import Reply
from loopwright.wire import dumps, loads


@tool
def pay(n: int) -> str:
    """Asked about."""
    return f"paid {n}"


BY_NAME = {"pay": pay}


def test_a_paused_call_whose_tool_is_gone_cannot_continue_but_a_finished_one_can():
    asked = ev.ApprovalPending(
        id="apr_1",
        tool="pay",
        args={"n": 1},
        scope=ev.Scope(tenant="t", environment="e", agent="a"),
        reason="matched rule 'ask-pay'",
        requested_at="2026-12-01T00:00:00.000Z",
    )
    reply = Reply.parse({"tool_calls": [{"name": "pay", "args": {"n": 1}, "id": "p"}]})
    paused = [
        ev.Session(session_id="s"),
        ev.InputReceived(message=UserMessage(content="go")),
        ev.MessageCompleted(message=AssistantMessage(parts=reply.parts)),
        asked,
        ev.PendingRequested(id="apr_1", call_id="p"),
        ev.LoopPaused(pending_ids=["apr_1"]),
        ev.Done(text="Paused.", stop_reason="paused"),
    ]
    snapshot = to_snapshot(fold(paused, BY_NAME))
    with pytest.raises(LookupError, match="'pay' of a paused call no longer exists"):
        continued(from_snapshot(snapshot, {}), died=False)
    decided = ev.PendingDecided(id="apr_1", status="denied", by="ops", decided_at="now")
    resumed = [
        decided,
        ev.Session(session_id="s"),
        ev.ToolOutput(id="p", tool="pay", content="denied", is_error=True),
        ev.Done(text="Stopped.", stop_reason="denied"),
    ]
    state = continued(fold(resumed, {}, from_snapshot(snapshot, {})), died=False)
    assert state.checkpoint is None and state.history.messages[-1].content == "denied"
    with pytest.raises(ValueError, match="not a version 1 session snapshot"):
        from_snapshot(snapshot.replace('"version":1', '"version":2'), BY_NAME)
    with pytest.raises(ValueError, match="not a version 1 session snapshot"):
        from_snapshot(snapshot.replace('"history":', '"messages":'), BY_NAME)


@pytest.mark.parametrize("durable", [False, True])
async def test_an_approved_call_that_suspends_is_not_asked_about_again(tmp_path, durable):
    """The parent's call of a subagent waits for approval; approved, it runs and suspends on
    the child's own ask. The batch pauses again on the child's item alone: the approved item's
    call runs again as a suspended call, never as a second decision (live, and as the log
    derives it when the session is opened again)."""
    from conftest import call, drive, scripted
    from loopwright import Agent, Approval, Rules, Session
    from loopwright.runtime import open_session
    from loopwright.store import open_log
    from loopwright.subagents import subagent_tool

    def asks(name: str) -> Rules:
        return Rules.from_yaml(f"rules: [{{name: asked, tool: {name}, decision: ask}}]")

    child = Agent(
        name="billing",
        description="Refunds.",
        model=scripted({"tool_calls": [call("pay", "p", n=5)]}, "Paid 5."),
        tools=[pay],
        rules=asks("pay"),
    )
    parent = Agent(
        name="support",
        model=scripted({"tool_calls": [call("billing", "b", request="pay 5")]}, "Done."),
        tools=[subagent_tool(child)],
        rules=asks("billing"),
    )
    log = await open_log(tmp_path / "lw.db") if durable else None

    async def opened(session: Session | None = None) -> Session:
        if log is None:
            return session or Session(parent, session_id="s")
        return await open_session(parent, log, "s")

    session = await opened()
    await drive(session.run("go"))
    [own] = session.pending
    await session.resolve(own.id, Approval.approve(by="ana"))
    paused = await drive((session := await opened(session)).resume())
    assert paused.stop_reason == "paused"
    session = await opened(session)
    checkpoint = session.state.checkpoint
    assert (list(checkpoint.pending), list(checkpoint.suspended)) == ([], ["b"])
    [nested] = session.pending
    assert nested.call.name == "pay"
    await session.resolve(nested.id, Approval.approve(by="ana"))
    done = await drive((session := await opened(session)).resume())
    assert done.text == "Done."
    assert [(e.id, e.content) for e in done.events if e.type == "tool:output"] == [("b", "Paid 5.")]
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    if log is not None:
        await log.close()


async def test_a_cancel_while_a_reply_is_committed_answers_its_calls_as_the_log_does():
    """A cancel that lands while the journal commits a reply with calls: the reply is in the
    state already (applied before the journal saw it), and the run answers its calls before it
    ends, so the live history is the one its events fold to, and valid for every provider."""
    from conftest import call, drive, scripted
    from loopwright import Agent, Session
    from loopwright.loop.calls import NOT_RUN

    committing, cancelled = asyncio.Event(), asyncio.Event()
    seen: list[ev.Event] = []

    class Journal:
        async def begin(self, session, input):
            pass

        async def end(self, session, stop_reason):
            pass

        def seq_of(self, event):
            return None

        async def append(self, session_id, event):
            seen.append(event)
            if event.type == "message:completed":  # held until the other task has cancelled
                committing.set()
                await cancelled.wait()

    model = scripted({"tool_calls": [call("pay", "p", n=1)]}, "never")
    session = Session(Agent(model=model, tools=[pay]), journal=Journal())

    async def cancel_while_committing():
        await committing.wait()
        session.cancel()
        cancelled.set()

    canceller = asyncio.create_task(cancel_while_committing())
    result = await drive(session.run("go"))
    await canceller
    assert result.stop_reason == "aborted"
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]
    assert session.messages[-1].content == NOT_RUN
    assert continued(fold(seen, BY_NAME), died=False).history.messages == session.messages


def test_partials_of_old_logs_and_new_ones_give_the_same_carry_over():
    """An old log's `message:partial` holds the whole text so far (no `offset`); a new one's,
    only what was added since the last one, from its offset. Both fold to the text streamed,
    across a snapshot too, and a reply's first partial (offset 0) starts afresh."""
    start = [ev.Session(session_id="s"), ev.InputReceived(message=UserMessage(content="go"))]
    old = [loads('{"type":"message:partial","text":"' + text + '"}') for text in ("ab", "abcd")]
    assert [(e.offset, e.text) for e in old] == [(0, "ab"), (0, "abcd")]
    new = [ev.MessagePartial(text="ab"), ev.MessagePartial(text="cd", offset=2)]
    assert [e.offset for e in map(loads, map(dumps, new))] == [0, 2]
    for log in (old, new):
        assert fold([*start, *log], {}).carry_over == "abcd"
        restored = from_snapshot(to_snapshot(fold([*start, log[0]], {})), {})
        assert fold(log[1:], {}, restored).carry_over == "abcd"
    again = [*start, *new, ev.MessagePartial(text="x"), ev.MessagePartial(text="yz", offset=1)]
    assert fold(again, {}).carry_over == "xyz"
