"""`loopwright acp` and the project's durable sessions, over JSON-RPC in real subprocesses: a
session loaded by a new process, one paused by another door and resumed at the next prompt,
stdin closed mid-run, `session/list`, the client's MCP servers as toolsets (SSE ones skipped),
and the command without its extra."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_peer import (
    ALLOW,
    ENV,
    Message,
    Peer,
    answering,
    brief,
    make_project,
    new_session,
    prompt,
    stored_items,
)
from loopwright.cli.main import USAGE_ERROR, main
from test_cli import LOOPWRIGHT


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`loopwright ARGV…` in a subprocess, no terminal, its output captured."""
    return subprocess.run(
        [LOOPWRIGHT, *argv],
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
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


async def test_a_session_paused_elsewhere_asks_at_the_next_prompt(peer, project):
    paused = cli("run", "refunds", "--project", str(project), "refund please")
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


async def test_a_session_decided_elsewhere_without_resuming_resumes_at_the_next_prompt(
    peer, project
):
    """Paused by `loopwright run`, its item edited with `approvals edit --no-resume` (which
    only records the answer): the next prompt resumes the run on the edit, then sends."""
    paused = cli("run", "refunds", "--project", str(project), "refund please")
    assert paused.returncode == 3, paused.stderr
    [stored] = await stored_items(project)
    changes = ["edit", stored["id"], '{"amount": 3}', "--no-resume"]
    edited = cli("approvals", "--project", str(project), *changes)
    assert edited.returncode == 0, edited.stderr
    await peer.handshake()
    params = {"sessionId": stored["session_id"], "cwd": "/", "mcpServers": []}
    await peer.call("session/load", params)
    seen, result = await prompt(peer, stored["session_id"], "thanks")
    assert [brief(m) for m in seen] == [
        ("tool_call_update", "r1", "in_progress"),
        ("tool_call_update", "r1", "completed"),
        ("agent_message_chunk", "Done: refunded 3"),
        ("agent_message_chunk", ".0 on A-1"),
        ("agent_message_chunk", "heard: refund pl"),
        ("agent_message_chunk", "ease | thanks"),
    ]
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


def test_without_the_extra_the_command_says_what_to_install(project, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "acp", None)  # as if agent-client-protocol were missing
    assert main(["acp", "refunds", "--project", str(project)]) == USAGE_ERROR
    assert capsys.readouterr().err == (
        "loopwright: error: the Agent Client Protocol SDK is not installed\n"
        "hint: pip install 'loopwright[acp]'\n"
    )
