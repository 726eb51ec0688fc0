"""A tool's `label` and result `details` over HTTP against a real server on loopback (SQLite
log): the full profile's SSE frames carry them, the v1 frames are what they were, and the log
and the history the doors read keep the details; the prepared arguments are what the stream,
the approval and the tool see."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest

from live_server import LiveServer, write
from loopwright.project import load_project
from loopwright.server import create_app

FILES = {
    "agent.py": """\
from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ToolReturn


def fix(args):
    return {"path": "/srv/files/" + args.pop("file")}


@tool(label="Read file", prepare_arguments=fix)
def read(path: str) -> ToolReturn:
    \"\"\"Read a file.\"\"\"
    return ToolReturn(content="text of " + path, details={"diff": "+a", "lines": 3})


def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return "read it"
    return Reply(tool_calls=(ToolCall(id="r1", name="read", args={"file": "a.md"}),))


agent = Agent(name="files", model=FunctionModel(reply), tools=[read])
""",
}
FRAME = re.compile(r"event: ([a-z_:]+)\n(?:id: \d+\n)?data: (\{.*\})")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("files")
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "files", FILES)
    with LiveServer(create_app(load_project(root))) as live, live.client() as client:
        yield client


def data_lines(http: httpx.Client, path: str) -> dict[str, str]:
    """Each event type's `data:` line (the last of its type) of the SSE stream of one run."""
    with http.stream("POST", path, json={"message": "read a.md"}) as response:
        assert response.status_code == 200
        text = response.read().decode()
    out = {}
    for block in text.split("\n\n"):
        if (match := FRAME.fullmatch(block)) is not None:
            out[match.group(1)] = match.group(2)
    return out


def test_full_frames_carry_the_label_and_the_details_and_the_log_and_history_keep_them(
    http: httpx.Client,
):
    data = data_lines(http, "/agents/files/messages/stream")
    started, output = json.loads(data["tool:started"]), json.loads(data["tool:output"])
    assert (started["label"], started["args"]) == ("Read file", {"path": "/srv/files/a.md"})
    assert output == {
        "id": "r1",
        "tool": "read",
        "content": "text of /srv/files/a.md",
        "isError": False,
        "details": {"diff": "+a", "lines": 3},
        "type": "tool:output",
    }
    sid = json.loads(data["session"])["sessionId"]
    log = http.get(f"/agents/files/sessions/{sid}/events").json()["events"]
    [logged] = [e["event"] for e in log if e["event"]["type"] == "tool:output"]
    assert logged["details"] == {"diff": "+a", "lines": 3}
    history = http.get(f"/agents/files/sessions/{sid}").json()["history"]
    assert [m for m in history if m["role"] == "tool"] == [
        {
            "callId": "r1",
            "tool": "read",
            "content": "text of /srv/files/a.md",
            "isError": False,
            "details": {"diff": "+a", "lines": 3},
            "role": "tool",
        }
    ]
    assert history[1]["parts"][0]["args"] == {"file": "a.md"}  # what the model sent


def test_v1_frames_are_as_they_were(http: httpx.Client):
    data = data_lines(http, "/v1/agents/files/messages/stream")
    assert data["tool:started"] == (
        '{"id":"r1","tool":"read","args":{"path":"/srv/files/a.md"},'
        '"detailText":"no rules: allowed","type":"tool:started"}'
    )
    assert "tool:output" not in data and "details" not in json.dumps(data)
