"""`loopwright acp` spoken to over JSON-RPC by a client of our own (tests/acp_peer.py), in a real
subprocess on a temporary project: the handshake, a prompt streaming thinking, text and a tool
call whose approval the editor gives, refuses or edits, a cancel mid-run, a question answered by
the next prompt, a decision made from another door, a subagent's approval, the stop reasons and
a failed run. Exact message sequences. (Sessions across processes, listing and MCP servers:
test_acp_sessions.py.)"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_peer import (
    ALLOW,
    REFUND_STREAM,
    REJECT,
    Message,
    Peer,
    answering,
    approvals,
    brief,
    make_project,
    new_session,
    prompt,
    stored_items,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


@pytest.fixture
async def peer(project: Path) -> AsyncIterator[Peer]:
    started = await Peer.start(project)
    try:
        yield started
    finally:
        started.kill()
        await started.process.wait()


async def test_initialize_says_what_the_agent_can(peer):
    assert await peer.handshake() == {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "loopwright", "title": "refunds", "version": "0.1.0"},
    }
    assert "loopwright acp" not in await peer.close()  # nothing worth a log line


async def test_a_prompt_streams_and_the_editor_approves_the_tool_call(peer, project):
    await peer.handshake()
    session = await new_session(peer)
    asked: list[Message] = []
    seen, result = await prompt(peer, session, "refund please", answering(peer, ALLOW, asked))
    assert [brief(m) for m in seen] == [
        *REFUND_STREAM,
        ("tool_call_update", "r1", "in_progress"),
        ("tool_call_update", "r1", "completed"),
        ("agent_message_chunk", "Done: refunded 5"),
        ("agent_message_chunk", ".0 on A-1"),
    ]
    assert result == {"stopReason": "end_turn"}
    assert seen[2]["params"] == {
        "sessionId": session,
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "r1",
            "title": "refund",
            "kind": "other",
            "status": "pending",
            "rawInput": {"order": "A-1", "amount": 5},
        },
    }
    [item] = await stored_items(project)
    assert asked[0]["params"] == {
        "sessionId": session,
        "toolCall": {
            "toolCallId": "r1",
            "title": "refund",
            "kind": "other",
            "status": "pending",
            "rawInput": {"order": "A-1", "amount": 5},
        },
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
        "_meta": {"loopwright": {"pendingId": item["id"]}},
    }
    assert seen[5]["params"]["update"] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "r1",
        "status": "completed",
        "content": [
            {"type": "content", "content": {"type": "text", "text": "refunded 5.0 on A-1"}}
        ],
        "rawOutput": {"content": "refunded 5.0 on A-1", "isError": False},
    }
    assert (item["status"], item["decided_by"], item["session_id"]) == (
        "approved",
        f"acp:{getpass.getuser()}",  # the user the agent runs as, not the client's own name
        session,
    )


async def test_a_rejected_tool_call_fails_and_the_run_goes_on(peer):
    await peer.handshake()
    session = await new_session(peer)
    seen, result = await prompt(peer, session, "refund please", answering(peer, REJECT, []))
    assert [brief(m) for m in seen] == [
        *REFUND_STREAM,
        ("tool_call_update", "r1", "failed"),
    ]  # the agent stops on a denial (loop:denied): the turn ends
    assert seen[4]["params"]["update"]["rawOutput"] == {
        "content": "Tool call denied by user. Reason: matched rule 'refunds-need-approval' — "
        "human denied",
        "isError": True,
    }
    assert result == {"stopReason": "end_turn"}


async def test_an_editor_that_shows_forms_may_edit_the_arguments(peer, project):
    await peer.handshake(elicitation={"form": {}})
    session = await new_session(peer)
    asked: list[Message] = []
    edits = iter([{"amount": "lots"}, {"amount": 3}])  # the first is refused

    async def on(message: Message) -> None:
        if message.get("method") == "session/request_permission":
            asked.append(message)
            await peer.answer(message, {"outcome": {"outcome": "selected", "optionId": "edit"}})
        elif message.get("method") == "elicitation/create":
            asked.append(message)
            await peer.answer(message, {"action": "accept", "content": next(edits)})

    seen, result = await prompt(peer, session, "refund please", on)
    assert [brief(m) for m in seen] == [
        *REFUND_STREAM,
        ("elicitation/create",),
        ("session/request_permission",),
        ("elicitation/create",),
        ("tool_call_update", "r1", "in_progress"),
        ("tool_call_update", "r1", "completed"),
        ("agent_message_chunk", "Done: refunded 3"),
        ("agent_message_chunk", ".0 on A-1"),
    ]
    assert result == {"stopReason": "end_turn"}
    assert [o["optionId"] for o in asked[0]["params"]["options"]] == [
        "allow_once",
        "edit",
        "reject_once",
    ]
    assert asked[1]["params"] == {
        "sessionId": session,
        "toolCallId": "r1",
        "mode": "form",
        "message": "Edit the arguments of refund, then allow it",
        "requestedSchema": {  # (the SDK leaves out `type`: "object" is its default)
            "properties": {
                "order": {"type": "string", "default": "A-1"},
                "amount": {"type": "integer", "default": 5},
            },
            "required": ["order", "amount"],
        },
    }
    [refused] = asked[2]["params"]["toolCall"]["content"]
    assert refused["content"]["text"].startswith("The edit was refused: ")
    assert seen[7]["params"]["update"]["rawInput"] == {"order": "A-1", "amount": 3}
    [item] = await stored_items(project)
    assert (item["status"], item["edited_args"]) == ("approved", {"order": "A-1", "amount": 3})


async def test_cancel_mid_run_answers_cancelled(peer):
    await peer.handshake()
    session = await new_session(peer)
    request = await peer.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}
    )

    async def on(message: Message) -> None:
        if brief(message) == ("tool_call_update", "w1", "in_progress"):
            await peer.notify("session/cancel", {"sessionId": session})

    seen, answer = await peer.until(request, on)
    assert [brief(m) for m in seen] == [
        ("tool_call", "w1", "pending"),
        ("tool_call_update", "w1", "in_progress"),
        ("tool_call_update", "w1", "failed"),
    ]
    assert answer["result"] == {"stopReason": "cancelled"}
    seen, _ = await prompt(peer, session, "still there?")  # the session goes on
    assert [brief(m) for m in seen] == [
        ("agent_message_chunk", "heard: wait | st"),
        ("agent_message_chunk", "ill there?"),
    ]


async def test_cancelling_while_the_editor_is_asked(peer, project):
    await peer.handshake()
    session = await new_session(peer)

    async def on(message: Message) -> None:
        if message.get("method") == "session/request_permission":
            await peer.notify("session/cancel", {"sessionId": session})
            await peer.answer(message, {"outcome": {"outcome": "cancelled"}})

    seen, result = await prompt(peer, session, "refund please", on)
    assert [brief(m) for m in seen] == [*REFUND_STREAM, ("tool_call_update", "r1", "failed")]
    assert result == {"stopReason": "cancelled"}
    assert approvals(project) == []  # nothing left open


async def test_a_question_ends_the_turn_and_the_next_prompt_answers_it(peer):
    await peer.handshake()
    session = await new_session(peer)
    seen, result = await prompt(peer, session, "ask me")
    assert [brief(m) for m in seen] == [
        ("tool_call", "q1", "pending"),
        ("agent_message_chunk", "\n\nWhich colour?\n"),
    ]
    assert result == {"stopReason": "end_turn"}
    seen, result = await prompt(peer, session, "blue")
    assert [brief(m) for m in seen] == [
        ("tool_call_update", "q1", "in_progress"),
        ("tool_call_update", "q1", "completed"),
        ("agent_message_chunk", "Done: blue"),
    ]
    assert result == {"stopReason": "end_turn"}


async def test_a_decision_from_another_door_wins_and_the_editor_request_is_moot(peer, project):
    await peer.handshake()
    session = await new_session(peer)
    late: list[Message] = []

    async def on(message: Message) -> None:
        if message.get("method") == "session/request_permission":
            late.append(message)
            pending = message["params"]["_meta"]["loopwright"]["pendingId"]
            await asyncio.to_thread(approvals, project, "deny", pending, "--no-resume")

    seen, _ = await prompt(peer, session, "refund please", on)
    assert [brief(m) for m in seen] == [*REFUND_STREAM, ("tool_call_update", "r1", "failed")]
    await peer.answer(late[0], ALLOW)  # too late: the first decision stands
    [item] = await stored_items(project)
    assert item["status"] == "denied"
    assert item["decided_by"] == getpass.getuser()  # the command's, not the editor's
    seen, _ = await prompt(peer, session, "hi")  # the late answer changed nothing
    assert [brief(m) for m in seen] == [
        ("agent_message_chunk", "heard: refund pl"),
        ("agent_message_chunk", "ease | hi"),
    ]


async def test_a_subagents_approval_is_asked_in_the_editor(peer):
    await peer.handshake()
    session = await new_session(peer)
    asked: list[Message] = []
    seen, result = await prompt(peer, session, "delegate", answering(peer, ALLOW, asked))
    assert [brief(m) for m in seen] == [
        ("tool_call", "d1", "pending"),
        ("tool_call_update", "d1", "in_progress"),
        ("tool_call", "c1", "pending"),  # the subagent's call, announced before it is asked
        ("session/request_permission",),
        ("tool_call_update", "d1", "completed"),
        ("agent_message_chunk", "Done: clerk: ref"),
        ("agent_message_chunk", "unded 7.0 on B-2"),
    ]
    assert asked[0]["params"]["toolCall"]["rawInput"] == {"order": "B-2", "amount": 7}
    assert result == {"stopReason": "end_turn"}


async def test_stop_reasons(peer):
    await peer.handshake()
    session = await new_session(peer)
    seen, result = await prompt(peer, session, "long")
    assert [brief(m) for m in seen] == [("agent_message_chunk", "Cut sho")]
    assert result == {"stopReason": "max_tokens"}
    seen, result = await prompt(peer, session, "loop")  # the agent's max_turns is 4
    assert [brief(m)[0] for m in seen] == ["tool_call", "tool_call_update", "tool_call_update"] * 4
    assert result == {"stopReason": "max_turn_requests"}


async def test_a_failed_run_is_an_error_and_prompt_blocks_become_text(peer):
    await peer.handshake()
    session = await new_session(peer)
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "fail now"}]}
    _, answer = await peer.until(await peer.request("session/prompt", params))
    assert answer["error"] == {
        "code": -32603,
        "message": "Internal error",
        "data": {"details": "model request failed: the provider is down"},
    }
    blocks = [
        {"type": "text", "text": "read these"},
        {"type": "resource_link", "name": "notes", "uri": "file:///notes.md"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "alpha"}},
    ]
    seen, _ = await peer.call("session/prompt", {"sessionId": session, "prompt": blocks})
    said = "".join(m["params"]["update"]["content"]["text"] for m in seen)
    assert said == (
        "heard: fail now | read these\n[notes](file:///notes.md)\nfile:///a.txt:\n```\nalpha\n```"
    )
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    params = {"sessionId": session, "prompt": [image]}
    _, answer = await peer.until(await peer.request("session/prompt", params))
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == {"prompt": "image content is not supported"}


async def test_two_approvals_of_one_reply_are_asked_in_turn(peer):
    await peer.handshake()
    session = await new_session(peer)
    asked: list[Message] = []
    on = answering(peer, ALLOW, asked)
    seen, result = await prompt(peer, session, "two refunds", on)
    assert [brief(m) for m in seen] == [
        ("tool_call", "r1A", "pending"),
        ("tool_call", "r1B", "pending"),
        ("session/request_permission",),
        ("session/request_permission",),
        ("tool_call_update", "r1A", "in_progress"),  # both run at once, results in call order
        ("tool_call_update", "r1B", "in_progress"),
        ("tool_call_update", "r1A", "completed"),
        ("tool_call_update", "r1B", "completed"),
        ("agent_message_chunk", "Done: refunded 1"),
        ("agent_message_chunk", ".0 on B"),
    ]
    assert [m["params"]["toolCall"]["toolCallId"] for m in asked] == ["r1A", "r1B"]
    assert result == {"stopReason": "end_turn"}


async def test_one_prompt_at_a_time_per_session(peer):
    await peer.handshake()
    session = await new_session(peer)
    await peer.notify("session/cancel", {"sessionId": session})  # nothing runs: nothing happens
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}
    first = await peer.request("session/prompt", params)
    running = ("tool_call_update", "w1", "in_progress")
    while brief(await peer.read()) != running:
        pass
    second = await peer.request("session/prompt", params)
    _, answer = await peer.until(second)
    assert answer["error"]["data"] == {"details": "a prompt of this session is running"}
    await peer.notify("session/cancel", {"sessionId": session})
    _, answer = await peer.until(first)
    assert answer["result"] == {"stopReason": "cancelled"}


async def test_what_else_writes_to_stdout_goes_to_stderr(peer):
    await peer.handshake()
    session = await new_session(peer)
    seen, result = await prompt(peer, session, "shout")
    assert [brief(m) for m in seen] == [
        ("tool_call", "s1", "pending"),
        ("tool_call_update", "s1", "in_progress"),
        ("tool_call_update", "s1", "completed"),
        ("agent_message_chunk", "Done: shouted"),
    ]
    assert result == {"stopReason": "end_turn"}
    err = await peer.close()
    assert "printed by a tool\n" in err
    assert "echoed by a subprocess\n" in err


async def test_two_questions_are_answered_by_the_next_two_prompts(peer):
    await peer.handshake()
    session = await new_session(peer)
    turns = []
    for text in ("ask twice", "red", "large"):
        seen, result = await prompt(peer, session, text)
        turns.append(([brief(m) for m in seen], result["stopReason"]))
    assert turns == [
        (
            [
                ("tool_call", "q1colour", "pending"),
                ("tool_call", "q1size", "pending"),
                ("agent_message_chunk", "\n\nWhich colour?\n"),
            ],
            "end_turn",
        ),
        ([("agent_message_chunk", "\n\nWhich size?\n")], "end_turn"),
        (
            [
                ("tool_call_update", "q1colour", "in_progress"),
                ("tool_call_update", "q1size", "in_progress"),
                ("tool_call_update", "q1colour", "completed"),
                ("tool_call_update", "q1size", "completed"),
                ("agent_message_chunk", "Done: large"),
            ],
            "end_turn",
        ),
    ]
