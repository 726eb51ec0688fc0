"""`loopwright acp` when the model uses a tool call id again in a later step (the OpenAI dialect
falls back to `call_<index>`): ACP wants tool call ids unique within a session, so each later
call is announced under an id of its own (`call_0~2`, ...) and its progress, result and approval
go to that card, never to the earlier one; across prompts, and after `session/load` in a new
process, which replays the same ids. Over JSON-RPC in real subprocesses (tests/acp_peer.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from acp_peer import ALLOW, Message, Peer, answering, brief, make_project, new_session, prompt

# Every call of every reply has the id call_0: two in a row for "twice", one that needs an
# approval for "refund".
AGENT_PY = '''\
from pathlib import Path

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage, UserMessage
from loopwright.testing import FunctionModel, Reply


@tool
def noop(n: int) -> str:
    """Do nothing."""
    return f"nothing {n}"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def reply(request):
    asked = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    results = [m for m in request.messages[asked:] if isinstance(m, ToolResultMessage)]
    if request.messages[asked].content == "refund" and not results:
        return Reply(tool_calls=(ToolCall(id="call_0", name="refund", args={"order": "A-1"}),))
    if request.messages[asked].content == "twice" and len(results) < 2:
        call = ToolCall(id="call_0", name="noop", args={"n": len(results) + 1})
        return Reply(tool_calls=(call,))
    return Reply(text="done")


agent = Agent(
    name="refunds",
    description="Calls its tools with one id.",
    model=FunctionModel(reply),
    tools=[noop, refund],
    rules=Path(__file__).with_name("rules.yaml"),
)
'''
RULES = """\
default_decision: allow
rules:
  - {name: refunds-need-approval, tool: refund, decision: ask}
"""


def project_in(root: Path) -> Path:
    project = make_project(root)
    folder = project / "agents" / "refunds"
    (folder / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    (folder / "rules.yaml").write_text(RULES)
    return project


def twice(first: str, second: str) -> list[tuple[str, ...]]:
    """The updates of the "twice" prompt, its calls shown as `first` and `second`."""
    return [
        ("tool_call", first, "pending"),
        ("tool_call_update", first, "in_progress"),
        ("tool_call_update", first, "completed"),
        ("tool_call", second, "pending"),
        ("tool_call_update", second, "in_progress"),
        ("tool_call_update", second, "completed"),
        ("agent_message_chunk", "done"),
    ]


REFUND = [
    ("tool_call", "call_0~3", "pending"),
    ("session/request_permission",),
    ("tool_call_update", "call_0~3", "in_progress"),
    ("tool_call_update", "call_0~3", "completed"),
    ("agent_message_chunk", "done"),
]


def outputs(seen: list[Message]) -> dict[str, str]:
    """The content each card ended with, by its id."""
    return {
        update["toolCallId"]: update["rawOutput"]["content"]
        for update in (m["params"]["update"] for m in seen if m.get("method") == "session/update")
        if "rawOutput" in update
    }


async def test_a_call_id_used_again_gets_a_card_of_its_own_across_prompts_and_a_load(
    tmp_path: Path,
):
    project = project_in(tmp_path / "shop")
    first = await Peer.start(project)
    try:
        await first.handshake()
        session = await new_session(first)
        seen, result = await prompt(first, session, "twice")
        assert [brief(m) for m in seen] == twice("call_0", "call_0~2")
        assert outputs(seen) == {"call_0": "nothing 1", "call_0~2": "nothing 2"}
        assert result == {"stopReason": "end_turn"}
        asked: list[Message] = []
        seen, _ = await prompt(first, session, "refund", answering(first, ALLOW, asked))
        assert [brief(m) for m in seen] == REFUND
        assert outputs(seen) == {"call_0~3": "refunded A-1"}
        [permission] = asked
        assert permission["params"]["toolCall"]["toolCallId"] == "call_0~3"
        await first.close()
    finally:
        first.kill()
    second = await Peer.start(project)  # a new process replays the ids the first one gave
    try:
        await second.handshake()
        params = {"sessionId": session, "cwd": "/", "mcpServers": []}
        seen, _ = await second.call("session/load", params)
        assert [brief(m) for m in seen] == [
            ("user_message_chunk", "twice"),
            *twice("call_0", "call_0~2"),
            ("user_message_chunk", "refund"),
            *[u for u in REFUND if u[0] != "session/request_permission"],
        ]
        seen, _ = await prompt(second, session, "twice")
        assert [brief(m) for m in seen] == twice("call_0~4", "call_0~5")
    finally:
        second.kill()
        await second.process.wait()
