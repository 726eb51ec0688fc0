"""`loopwright acp` spoken to over JSON-RPC by a client of our own (tests/acp_peer.py), in a real
subprocess on a temporary project: the handshake, a prompt streaming thinking, text and a tool
call whose approval the editor gives (or refuses), a cancel mid-run, a question answered by the
next prompt, a decision made from another door, a session loaded by a new process, and the
client's MCP server attached to its session. Exact message sequences."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from acp_peer import ENV, Message, Peer, brief, make_project
from loopwright.cli.common import Place
from loopwright.cli.main import USAGE_ERROR, main
from test_cli import LOOPWRIGHT

ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


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


async def new_session(peer: Peer, **params: Any) -> str:
    _, result = await peer.call("session/new", {"cwd": "/", "mcpServers": [], **params})
    return str(result["sessionId"])


async def prompt(peer: Peer, session: str, text: str, on: Any = None) -> tuple[list[Message], Any]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    return await peer.call("session/prompt", params, on)


def answering(peer: Peer, result: Message, asked: list[Message]) -> Any:
    async def on(message: Message) -> None:
        if message.get("method") == "session/request_permission":
            asked.append(message)
            await peer.answer(message, result)

    return on


def approvals(project: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [LOOPWRIGHT, "approvals", "--project", str(project), "--json", *args],
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


async def stored_items(project: Path) -> list[dict[str, Any]]:
    """Every pending item the project's log holds, decided or not."""
    log = await Place(project).log()
    try:
        return [asdict(item) for item in (await log.pending("default", status=None)).items]
    finally:
        await log.close()


REFUND_STREAM = [
    ("agent_thought_chunk", "Needs approval."),
    ("agent_message_chunk", "Refunding."),
    ("tool_call", "r1", "pending"),
    ("session/request_permission",),
]


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
        "acp:test-client",
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
    assert item["decided_by"] != "acp:test-client"
    seen, _ = await prompt(peer, session, "hi")  # the late answer changed nothing
    assert [brief(m) for m in seen] == [
        ("agent_message_chunk", "heard: refund pl"),
        ("agent_message_chunk", "ease | hi"),
    ]


async def test_load_replays_the_history_in_a_new_process(project):
    first = await Peer.start(project)
    try:
        await first.handshake()
        session = await new_session(first)
        await prompt(first, session, "hello")
        await prompt(first, session, "refund please", answering(first, ALLOW, []))
        await first.close()
    finally:
        first.kill()
    second = await Peer.start(project)
    try:
        await second.handshake()
        seen, result = await second.call(
            "session/load", {"sessionId": session, "cwd": "/", "mcpServers": []}
        )
        assert result == {}
        assert [brief(m) for m in seen] == [
            ("user_message_chunk", "hello"),
            ("agent_message_chunk", "heard: hello"),
            ("user_message_chunk", "refund please"),
            ("agent_thought_chunk", "Needs approval."),
            ("agent_message_chunk", "Refunding."),
            ("tool_call", "r3", "pending"),
            ("tool_call_update", "r3", "in_progress"),
            ("tool_call_update", "r3", "completed"),
            ("agent_message_chunk", "Done: refunded 5.0 on A-1"),
        ]
        seen, _ = await prompt(second, session, "bye")
        assert "".join(m["params"]["update"]["content"]["text"] for m in seen) == (
            "heard: hello | refund please | bye"
        )
        _, answer = await second.until(
            await second.request(
                "session/load", {"sessionId": "nope", "cwd": "/", "mcpServers": []}
            )
        )
        assert answer["error"]["code"] == -32002  # resource not found
    finally:
        second.kill()
        await second.process.wait()


async def test_the_clients_mcp_server_is_a_toolset_of_its_session(peer):
    await peer.handshake()
    server = {
        "name": "clock",
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
        "env": [],
    }
    for _ in range(2):  # two sessions with the same server: one server process for both
        session = await new_session(peer, mcpServers=[server])
        seen, result = await prompt(peer, session, "time please")
        assert [brief(m) for m in seen][:3] == [
            ("tool_call", "t1", "pending"),
            ("tool_call_update", "t1", "in_progress"),
            ("tool_call_update", "t1", "completed"),
        ]
        output = json.loads(seen[2]["params"]["update"]["rawOutput"]["content"])
        assert output["timezone"] == "UTC"
        assert result == {"stopReason": "end_turn"}
    plain = await new_session(peer)  # a session without servers: the tool is unknown there
    seen, _ = await prompt(peer, plain, "time")
    assert [brief(m) for m in seen][:2] == [
        ("tool_call", "t1", "pending"),
        ("tool_call_update", "t1", "failed"),
    ]
    err = await peer.close()
    assert err.count("MCP servers from the client: clock") == 1


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


async def test_a_session_paused_elsewhere_asks_at_the_next_prompt(peer, project):
    paused = subprocess.run(
        [LOOPWRIGHT, "run", "refunds", "--project", str(project), "refund please"],
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert paused.returncode == 3, paused.stderr  # paused: nobody could approve there
    [stored] = await stored_items(project)
    session = stored["session_id"]
    await peer.handshake()
    _, loaded = await peer.call(
        "session/load", {"sessionId": session, "cwd": "/", "mcpServers": []}
    )
    assert loaded == {}
    asked: list[Message] = []
    seen, result = await prompt(peer, session, "thanks", answering(peer, ALLOW, asked))
    assert [brief(m) for m in seen] == [
        ("tool_call", "r1", "pending"),
        ("session/request_permission",),
        ("tool_call_update", "r1", "in_progress"),
        ("tool_call_update", "r1", "completed"),
        ("agent_message_chunk", "Done: refunded 5"),
        ("agent_message_chunk", ".0 on A-1"),
        ("agent_message_chunk", "heard: refund pl"),
        ("agent_message_chunk", "ease | thanks"),
    ]
    assert asked[0]["params"]["_meta"] == {"loopwright": {"pendingId": stored["id"]}}
    assert result == {"stopReason": "end_turn"}


async def test_closing_stdin_mid_run_cancels_and_records_it(peer, project):
    await peer.handshake()
    session = await new_session(peer)
    request = await peer.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}
    )
    running = ("tool_call_update", "w1", "in_progress")
    while brief(await peer.read()) != running:
        pass
    assert request == 3
    await peer.close()  # exits 0
    shown = subprocess.run(
        [LOOPWRIGHT, "sessions", "show", session, "--agent", "refunds"],
        cwd=project,
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=True,
    )
    assert "aborted" in shown.stdout + shown.stderr


async def test_sse_servers_are_skipped_with_a_warning(peer):
    await peer.handshake()
    sse = {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
    session = await new_session(peer, mcpServers=[sse])
    seen, _ = await prompt(peer, session, "hello")
    assert [brief(m) for m in seen] == [("agent_message_chunk", "heard: hello")]
    err = await peer.close()
    assert "MCP server 'old' skipped: sse servers are not supported" in err


async def test_list_names_the_agents_sessions(peer, project):
    await peer.handshake()
    first, second = await new_session(peer), await new_session(peer)
    await prompt(peer, first, "hello")
    await prompt(peer, second, "delegate", answering(peer, ALLOW, []))  # a subagent's session too
    _, listed = await peer.call("session/list", {})
    assert [(s["sessionId"], s["cwd"]) for s in listed["sessions"]] == [
        (second, str(project)),
        (first, str(project)),
    ]
    assert listed.keys() == {"sessions"}  # no next page
    _, answer = await peer.until(await peer.request("session/list", {"cursor": "nope"}))
    assert answer["error"]["code"] == -32602


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


def test_without_the_extra_the_command_says_what_to_install(project, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "acp", None)  # as if agent-client-protocol were missing
    assert main(["acp", "refunds", "--project", str(project)]) == USAGE_ERROR
    assert capsys.readouterr().err == (
        "loopwright: error: the Agent Client Protocol SDK is not installed\n"
        "hint: pip install 'loopwright[acp]'\n"
    )
