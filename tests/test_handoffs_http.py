"""A handoff over HTTP (docs/handoffs.md): a project whose `triage` hands the conversation to
`billing` (agent.yaml `handoffs:`), served by a real server on loopback. The full profile's SSE
stream and body carry `agent:handoff`; a v1 client sees the transfer as an ordinary tool call
and keeps working; the session's next message, at the first agent's route, is billing's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, write
from loopwright.errors import ConfigError
from loopwright.project import load_project
from loopwright.server import create_app
from test_server_stream import events_of, frames

TRIAGE = {
    "agent.yaml": """\
        model: scripted:script.yaml
        instructions: You are triage.
        handoffs: [billing]
    """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: transfer_to_billing, args: {}, id: t1}]
    """,
}
BILLING = {
    "agent.yaml": """\
        model: scripted:script.yaml
        description: Refunds and invoices.
        instructions: You are billing.
        handoffs: [{agent: triage, history: full}]
    """,
    "script.yaml": """\
        replies:
          - Billing here.
          - Still billing.
    """,
}


DESK = {  # hands off to `refunds`, whose `refund` a human approves
    "agent.yaml": """\
        model: scripted:script.yaml
        handoffs: [refunds]
    """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: transfer_to_refunds, args: {}, id: d1}]
    """,
}
REFUNDS = {
    "agent.yaml": """\
        model: scripted:script.yaml
        description: Refunds orders.
    """,
    "tools.py": """\
        from loopwright import tool

        @tool
        def refund(order: str) -> str:
            \"\"\"Refund an order.\"\"\"
            return f"refunded {order}"
    """,
    "rules.yaml": """\
        rules: [{name: refunds-asked, tool: refund, decision: ask}]
        default_decision: allow
    """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: refund, args: {order: A-1}, id: r1}]
          - Refunded A-1.
    """,
}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("handoffs")
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "triage", TRIAGE)
    write(root / "agents" / "billing", BILLING)
    write(root / "agents" / "desk", DESK)
    write(root / "agents" / "refunds", REFUNDS)
    with LiveServer(create_app(load_project(root))) as live, live.client() as client:
        yield client


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


TRANSFER_V1 = [
    {"type": "session", "sessionId": "?"},
    {"type": "budget:check"},
    {
        "type": "actauth:decision",
        "tool": "transfer_to_billing",
        "decision": "allow",
    },
    {"type": "tool:started", "id": "t1", "tool": "transfer_to_billing", "args": {}},
    {"type": "toollane:result"},
    {"type": "tool:result", "id": "t1", "tool": "transfer_to_billing"},
    {"type": "budget:check"},
    {"type": "loop:done", "text": "Billing here."},
    {"type": "done", "text": "Billing here."},
]


def test_the_sse_stream_carries_the_handoff_and_the_next_message_is_billings(
    http: httpx.Client,
) -> None:
    with http.stream(
        "POST", "/agents/triage/messages/stream", json={"message": "I want a refund"}
    ) as response:
        read = events_of(frames(response))
    kinds = [e["type"] for e in read if not e["type"].endswith(":delta")]
    assert kinds == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "message:completed",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        "agent:handoff",
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    [handoff] = [e for e in read if e["type"] == "agent:handoff"]
    assert handoff == {
        "type": "agent:handoff",
        "from": "triage",
        "to": "billing",
        "callId": "t1",
        "history": "full",
    }
    [output] = [e for e in read if e["type"] == "tool:output"]
    assert output["content"] == "Transferred to billing."
    assert read[-1] == {"type": "done", "text": "Billing here.", "stopReason": "completed"}
    sid = read[0]["sessionId"]
    # the session keeps its first agent's route; its next message is billing's
    again = ok(http.post("/agents/triage/messages", json={"message": "thanks", "sessionId": sid}))
    assert again["text"] == "Still billing."
    assert "agent:handoff" not in [e["type"] for e in again["events"]]
    logged = ok(http.get(f"/agents/triage/sessions/{sid}/events"))["events"]
    assert [e["event"]["type"] for e in logged].count("agent:handoff") == 1


def test_a_v1_client_sees_an_ordinary_tool_call_and_keeps_working(http: httpx.Client) -> None:
    with http.stream(
        "POST", "/v1/agents/triage/messages/stream", json={"message": "I want a refund"}
    ) as response:
        read = events_of(frames(response))
    sid = read[0]["sessionId"]
    shaped = [{k: e[k] for k in want if k in e} for e, want in zip(read, TRANSFER_V1, strict=True)]
    expected = [dict(w, sessionId=sid) if w["type"] == "session" else w for w in TRANSFER_V1]
    assert shaped == expected
    assert {e["type"] for e in read} <= {
        "session",
        "budget:check",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:result",
        "loop:done",
        "done",
    }
    body = ok(http.post("/v1/agents/triage/messages", json={"message": "ok", "sessionId": sid}))
    assert body["text"] == "Still billing."
    assert [e["type"] for e in body["events"]] == ["session", "budget:check", "loop:done", "done"]


def test_a_handoff_to_no_agent_of_the_project_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "loopwright.toml").write_text("")
    write(tmp_path / "agents" / "triage", {**TRIAGE, "agent.yaml": TRIAGE["agent.yaml"]})
    with pytest.raises(ConfigError) as caught:
        load_project(tmp_path)
    message = str(caught.value)
    assert "handoffs: 'billing' is not an agent of the project (agents: triage)" in message
    assert f"{tmp_path / 'agents' / 'triage' / 'agent.yaml'}:3" in message


def test_a_fork_after_the_handoff_goes_on_with_billing(http: httpx.Client) -> None:
    done = ok(http.post("/agents/triage/messages", json={"message": "refund please"}))
    sid = done["sessionId"]
    events = ok(http.get(f"/agents/triage/sessions/{sid}/events"))["events"]
    [at] = [e["seq"] for e in events if e["event"]["type"] == "agent:handoff"]
    response = http.post(f"/agents/triage/sessions/{sid}/fork", json={"at": at})
    assert response.status_code == 201, response.text
    forked = response.json()
    assert forked["agent"] == "triage"  # (its key keeps the first agent)
    shown = [ok(http.get(f"/agents/triage/sessions/{s}")) for s in (sid, forked["sessionId"])]
    assert [s["activeAgent"] for s in shown] == ["billing", "billing"]
    body = {"message": "and then?", "sessionId": forked["sessionId"]}
    again = ok(http.post("/agents/triage/messages", json=body))
    assert again["text"] == "Billing here."  # billing's model, from the top of its script
    assert "agent:handoff" not in [e["type"] for e in again["events"]]


def test_the_targets_own_approval_resumes_with_the_target(http: httpx.Client) -> None:
    """After the handoff, the target's call pauses on its rules; approving it resumes the
    session (read back from the log) with the target, which finishes the run."""
    response = http.post("/agents/desk/messages", json={"message": "refund A-1"})
    assert response.status_code == 202, response.text
    paused = response.json()
    assert paused["tool"] == "refund"
    [asked] = [e for e in paused["events"] if e["type"] == "approval:pending"]
    assert asked["scope"]["agent"] == "refunds"  # (the body's `scope` names the session's key)
    assert "agent:handoff" in [e["type"] for e in paused["events"]]
    done = ok(http.post(f"/approvals/{paused['id']}/approve", json={}))
    assert done["text"] == "Refunded A-1."
    outputs = [e["content"] for e in done["events"] if e["type"] == "tool:output"]
    assert outputs == ["Transferred to refunds.", "refunded A-1"]  # (the body: the whole tree)
