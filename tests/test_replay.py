"""The reducer (`loopwright.replay`) at its edges: a paused call whose tool no longer exists,
and snapshots it did not write. (The property that the state folded from the log is the live
state is in test_replay_property.py.)"""

from __future__ import annotations

import pytest

from loopwright import events as ev
from loopwright import tool
from loopwright.messages import AssistantMessage, UserMessage
from loopwright.replay import continued, fold, from_snapshot, to_snapshot
from loopwright.testing import Reply


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
    history = continued(fold(resumed, {}, from_snapshot(snapshot, {})), died=False)
    assert history.checkpoint is None and history.messages[-1].content == "denied"
    with pytest.raises(ValueError, match="not a version 1 session snapshot"):
        from_snapshot(snapshot.replace('"version":1', '"version":2'), BY_NAME)
    with pytest.raises(ValueError, match="not a version 1 session snapshot"):
        from_snapshot(snapshot.replace('"history":', '"messages":'), BY_NAME)
