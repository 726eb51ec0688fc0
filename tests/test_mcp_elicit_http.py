"""An MCP server's elicitation in a run held by an HTTP stream (nobody to answer live), through
the server on loopback with its SQLite log: the stream shows the question and the run pauses;
the answer, posted to the question's route, resumes the run and the call runs again with it;
and the same when the server restarted between the two (the run resumes from the log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from live_server import LiveServer, write
from loopwright.project import load_project
from loopwright.server import create_app
from mcp_servers import EVERYTHING, node
from test_server import body, check_full, types
from test_server_stream import Frames, events_of

TRIGGER = "mcp__everything__trigger-elicitation-request"
ANSWER = {"answer": '{"name": "Ada Lovelace", "check": true}'}
PAUSED = [
    "tool:started",
    "question:pending",
    "pending:requested",
    "tool:suspended",
    "step:finished",
    "loop:paused",
    "done",
]


def project(root: Path) -> Path:
    """An agent whose model calls the reference server's elicitation tool, then says "Signed up."."""
    servers = {"everything": {"command": node(), "args": [str(EVERYTHING), "stdio"]}}
    write(
        root,
        {
            "loopwright.toml": "",
            "agents/signup/agent.yaml": """\
                description: Signs people up.
                model: scripted:script.yaml
                """,
            "agents/signup/script.yaml": f"""\
                replies:
                  - tool_calls: [{{name: {TRIGGER}, args: {{}}, id: c1}}]
                  - text: Signed up.
                """,
            "agents/signup/rules.yaml": "rules: [{name: mcp, tool: 'mcp__everything__*', "
            "decision: allow}]\n",
            "agents/signup/mcp.json": json.dumps({"mcpServers": servers}),
        },
    )
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return project(tmp_path / "signup")


def serve(root: Path) -> LiveServer:
    return LiveServer(create_app(load_project(root, dotenv=False)))


def after_start(names: list[str]) -> list[str]:
    return names[names.index("tool:started") :]


def answered(done: dict[str, Any]) -> None:
    """The answer's body (the whole turn: the paused run, the decision, the resumed run): the
    call ran again and the server got `accept` with the answer."""
    check_full(done["events"])
    names = types(done["events"])
    assert names[names.index("loop:paused") :][:4] == [
        "loop:paused",
        "done",
        "pending:decided",
        "session",
    ]
    resumed = done["events"][names.index("pending:decided") + 1 :]
    assert types(resumed)[:4] == [
        "session",
        "question:resolved",
        "actauth:decision",
        "tool:started",
    ]
    [shown] = [e["content"] for e in resumed if e["type"] == "tool:output"]
    assert shown.startswith(
        "✅ User provided the requested information!\n\nUser inputs:\n- Name: Ada Lovelace\n"
    )
    assert done["text"] == "Signed up." and resumed[-1]["stopReason"] == "completed"


def test_the_stream_shows_the_question_and_the_answer_resumes_the_run(root: Path) -> None:
    """The stream follows the session across the pause: the paused run, then (once the answer
    is posted) the resumed one, and ends with it."""
    with serve(root) as live, live.client() as http:
        with http.stream("POST", "/agents/signup/messages/stream", json={"message": "hi"}) as r:
            stream = Frames(r)
            events: list[dict[str, Any]] = []
            while not events or events[-1]["type"] != "done":
                events += events_of(stream.read(1))
            assert after_start(types(events)) == PAUSED
            assert events[-1]["stopReason"] == "paused"
            asked = next(e for e in events if e["type"] == "question:pending")
            assert asked["question"].startswith(
                "The MCP server 'everything' asks: Please provide inputs for the following "
                "fields:\n"
            )
            sid = events[0]["sessionId"]
            url = f"/agents/signup/sessions/{sid}/questions"
            [listed] = body(http.get(url), 200)["questions"]
            assert (listed["id"], listed["question"]) == (asked["id"], asked["question"])
            done = body(http.post(f"/questions/{asked['id']}/answer", json=ANSWER), 200)
            answered(done)
            rest = events_of(stream.read())  # (to its end: the run stopped for good)
        streamed = [e for e in events + rest if not e["type"].endswith(":delta")]
        assert streamed == done["events"]
        assert body(http.get(url), 200)["questions"] == []


def test_a_restarted_server_resumes_the_paused_call_from_the_log(root: Path) -> None:
    with serve(root) as live, live.client() as http:
        paused = body(http.post("/agents/signup/messages", json={"message": "hi"}), 202)
    assert (paused["type"], paused["stopReason"]) == ("question", "paused")
    assert after_start(types(paused["events"])) == PAUSED
    with serve(root) as live, live.client() as http:  # a new runtime, the same database
        answered(body(http.post(f"/questions/{paused['id']}/answer", json=ANSWER), 200))
