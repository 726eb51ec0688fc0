"""A handoff over ACP (`loopwright acp triage`, a real subprocess speaking JSON-RPC, on the
project of test_handoffs_http.py): the transfer shows as a tool call, the handoff as a thought
chunk, the answer is billing's, and the session's later prompts go to billing; a new process
loading the session replays the handoff and goes on with billing too."""

from __future__ import annotations

import asyncio
from pathlib import Path

from acp_peer import ENV, Peer, brief, new_session, prompt
from live_server import write
from test_cli import LOOPWRIGHT
from test_handoffs_http import BILLING, TRIAGE

HANDED = ("agent_thought_chunk", "→ handed off from triage to billing\n")


async def start(project: Path) -> Peer:
    process = await asyncio.create_subprocess_exec(
        LOOPWRIGHT,
        "acp",
        "triage",
        "--project",
        str(project),
        cwd=project,
        env=ENV,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Peer(process)


async def test_a_handoff_over_acp(tmp_path: Path) -> None:
    (tmp_path / "loopwright.toml").write_text("")
    write(tmp_path / "agents" / "triage", TRIAGE)
    write(tmp_path / "agents" / "billing", BILLING)
    first = await start(tmp_path)
    try:
        await first.handshake()
        session = await new_session(first)
        seen, result = await prompt(first, session, "refund please")
        assert result == {"stopReason": "end_turn"}
        shown = [brief(m) for m in seen]
        assert shown == [
            ("tool_call", "t1", "pending"),
            ("tool_call_update", "t1", "in_progress"),
            ("tool_call_update", "t1", "completed"),
            HANDED,
            ("agent_message_chunk", "Billing here."),
        ], shown
        await first.close()
    finally:
        first.kill()
        await first.process.wait()
    second = await start(tmp_path)
    try:
        await second.handshake()
        seen, _ = await second.call(
            "session/load", {"sessionId": session, "cwd": "/", "mcpServers": []}
        )
        assert HANDED in [brief(m) for m in seen]
        seen, _ = await prompt(second, session, "thanks")
        assert [brief(m) for m in seen] == [("agent_message_chunk", "Still billing.")]
    finally:
        second.kill()
        await second.process.wait()
