"""A tool's `label` at the doors that showed only its name: the pending listings (`GET
/pending`, `/agents/{name}/approvals`, a session's approvals; `loopwright approvals list`), the
terminal approval prompt of `loopwright run`, `loopwright chat`'s view and ACP's tool call
titles. The v1 profile's listings stay as they were."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import test_chat
from acp_peer import ALLOW, Message, Peer, answering, brief, new_session, prompt
from acp_peer import make_project as acp_project
from chat_terminal import needs_tmux
from live_server import DESK, LiveServer, write
from loopwright.cli.common import user_name
from loopwright.client import Client
from loopwright.project import load_project
from loopwright.server import create_app
from test_cli import AGENT_PY as SUPPORT_AGENT_PY
from test_cli import ENV, LOOPWRIGHT, SUPPORT, shown, terminal

LABEL = "Refund an amount"
TILL = {  # a top-level agent whose labelled tool asks for approval
    "agent.yaml": """\
        description: The till.
        model: scripted:script.yaml
        """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: refund, args: {amount: 5}, id: r1}]
          - text: Refunded.
        """,
    "tools.py": f"""\
        from loopwright import tool


        @tool(label={LABEL!r})
        def refund(amount: float) -> str:
            \"\"\"Refund an amount.\"\"\"
            return f"refunded {{amount:g}}"
        """,
    "rules.yaml": "rules: [{name: refunds, tool: refund, decision: ask}]\n",
}
LABELLED_DESK = DESK | {  # the desk's subagent's tool, labelled
    "subagents/billing/tools.py": DESK["subagents/billing/tools.py"].replace(
        "@tool\n", '@tool(label="Bill a refund")\n'
    )
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "labels"
    root.mkdir()
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "till", TILL)
    write(root / "agents" / "desk", LABELLED_DESK)
    return root


def lw(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOOPWRIGHT, *args], cwd=project, env=ENV, capture_output=True, text=True, timeout=60
    )


def test_the_pending_listings_carry_the_label_on_the_full_profile(project: Path) -> None:
    with LiveServer(create_app(load_project(project))) as live, live.client() as http:
        till = http.post("/agents/till/messages", json={"message": "refund 5"})
        desk = http.post("/agents/desk/messages", json={"message": "refund 5"})
        assert (till.status_code, desk.status_code) == (202, 202)
        sid, pid = till.json()["sessionId"], till.json()["id"]
        [listed] = http.get("/agents/till/approvals").json()["approvals"]
        assert listed == {
            "id": pid,
            "sessionId": sid,
            "agent": "till",
            "tool": "refund",
            "label": LABEL,
            "args": {"amount": 5},
            "scope": {"tenant": "default", "environment": "production", "agent": "till"},
            "reason": "matched rule 'refunds'",
            "requestedAt": listed["requestedAt"],
            "approveUrl": f"/approvals/{pid}/approve",
            "denyUrl": f"/approvals/{pid}/deny",
        }
        assert http.get(f"/agents/till/sessions/{sid}/approvals").json() == {"approvals": [listed]}
        items = http.get("/pending").json()["items"]
        assert [(i["agent"], i.get("subagent"), i["tool"], i["label"]) for i in items] == [
            ("till", None, "refund", LABEL),
            ("desk", "billing", "refund", "Bill a refund"),  # the subagent's own tool's label
        ]
        v1 = http.get("/v1/pending").json()["items"]  # the v1 profile's listing: as it was
        assert [sorted(i) for i in v1] == [sorted(set(i) - {"label"}) for i in items]
        shown = http.get(f"/agents/till/sessions/{sid}").json()["pending"]
        assert shown == [{**listed, "type": "approval"}]
        with Client(live.url) as client:  # the Python client reads it
            waiting = client.pending().items
            assert [(w.tool, w.label) for w in waiting] == [
                ("refund", LABEL),
                ("refund", "Bill a refund"),
            ]
            assert client.session("till", sid).waiting[0].label == LABEL


def test_approvals_list_shows_a_label_column_and_json_field(project: Path) -> None:
    paused = lw(project, "run", "till", "refund 5")  # no terminal: the run pauses
    assert paused.returncode == 3, paused.stderr
    [item] = [json.loads(line) for line in lw(project, "approvals", "--json").stdout.splitlines()]
    assert (item["tool"], item["label"], item["args"]) == ("refund", LABEL, {"amount": 5})
    header, row = lw(project, "approvals").stdout.splitlines()
    assert header.split() == ["ID", "KIND", "TOOL", "LABEL", "ARGS", "REASON", "SESSION"]
    assert row == (
        f"{item['id']}  approval  refund  {LABEL}  {{\"amount\": 5}}  matched rule 'refunds'  "
        + item["session_id"]
    )


def test_the_terminal_approval_prompt_names_the_label_and_the_tool(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    replies = [{**r, "delay": 0} for r in _support_script()]
    (folder / "script.json").write_text(json.dumps({"replies": replies}))
    labelled = SUPPORT_AGENT_PY.format(support=str(SUPPORT / "agent.py")).replace(
        "model=ScriptedModel.from_script(script))",
        "model=ScriptedModel.from_script(script), tools=[\n"
        "    dataclasses.replace(t, label='Issue a refund') if t.name == 'issue_refund' else t\n"
        "    for t in support.agent.tools\n])",
    )
    (folder / "agent.py").write_text(labelled)
    with terminal() as (keyboard, tty):
        proc = subprocess.Popen(
            [LOOPWRIGHT, "run", str(folder), "Hi, my order A-1001 arrived damaged."],
            cwd=tmp_path,
            env=ENV,
            stdin=tty,
            stdout=subprocess.PIPE,
            stderr=tty,
            text=True,
        )
        os.write(keyboard, b"a\n")
        proc.communicate(timeout=60)
        err = shown(keyboard)
    assert proc.returncode == 0, err
    lines = err.splitlines()
    asked = next(i for i, line in enumerate(lines) if "needs your approval" in line)
    assert lines[asked] == (
        "? Issue a refund (issue_refund) needs your approval · matched rule 'refunds-need-approval'"
    )
    assert "→ Issue a refund {" in err  # (the renderer's line, as before)


def _support_script() -> list[dict[str, Any]]:
    return list(yaml.safe_load((SUPPORT / "script.yaml").read_text())["replies"])


@needs_tmux
def test_chat_shows_the_label_at_the_prompt_and_on_the_panel(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "agents" / "refunds").mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    labelled = test_chat.AGENT_PY.replace(
        "@tool\ndef refund(", '@tool(label="Refund")\ndef refund('
    )
    assert labelled != test_chat.AGENT_PY
    (root / "agents" / "refunds" / "agent.py").write_text(labelled)
    (root / "agents" / "refunds" / "rules.yaml").write_text(test_chat.RULES)
    home = tmp_path / "tmux"
    home.mkdir()
    pane = test_chat.Pane(home, [LOOPWRIGHT, "chat", "refunds"], root, test_chat.ENV)
    try:
        pane.wait("refunds · a new conversation · /help for help")
        pane.type("refund order A-1 please")
        pane.wait("[a]pprove / [d]eny / [e]dit arguments?")
        pane.type("a")
        screen = pane.wait(lambda s: "— 2 model requests" in s and s.endswith("›"))
    finally:
        pane.close()
    lines = test_chat.after(screen, "› refund order A-1 please")
    assert lines[2:-2] == [
        "Refunding.",
        "? Refund (refund) needs your approval · matched rule 'refunds-need-approval'",
        '  arguments: {"order": "A-1", "amount": 5}',
        "  [a]pprove / [d]eny / [e]dit arguments? a",
        f"  refund approved by {user_name()}",
        '╭─ Refund {"order": "A-1", "amount": 5} ─╮',
        "│ refunded 5.0 on A-1                    │",
        "╰────────────────────────────────────────╯",
        "Done: refunded 5.0 on A-1",
    ]


async def test_acp_titles_the_tool_call_with_the_label(tmp_path: Path) -> None:
    project = acp_project(tmp_path / "shop")
    agent_py = project / "agents" / "refunds" / "agent.py"
    text = agent_py.read_text()
    agent_py.write_text(text.replace("@tool\ndef refund(", '@tool(label="Refund")\ndef refund('))
    assert agent_py.read_text() != text
    peer = await Peer.start(project)
    try:
        await peer.handshake()
        session = await new_session(peer)
        asked: list[Message] = []
        seen, result = await prompt(peer, session, "refund please", answering(peer, ALLOW, asked))
    finally:
        peer.kill()
        await peer.process.wait()
    assert result == {"stopReason": "end_turn"}
    calls = [m["params"]["update"] for m in seen if "update" in m.get("params", {})]
    titles = [
        (u["sessionUpdate"], u.get("status"), u.get("title"))
        for u in calls
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]
    assert titles == [
        ("tool_call", "pending", "refund"),  # the reply's call: its name (no label known yet)
        ("tool_call_update", "in_progress", "Refund"),
        ("tool_call_update", "completed", None),
    ]
    [permission] = asked
    assert permission["params"]["toolCall"]["title"] == "Refund"
    assert permission["params"]["toolCall"]["kind"] == "other"  # the kind: from the name
    assert [brief(m) for m in seen][-2:] == [
        ("agent_message_chunk", "Done: refunded 5"),
        ("agent_message_chunk", ".0 on A-1"),
    ]
