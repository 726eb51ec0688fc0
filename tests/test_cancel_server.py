"""A cancel over HTTP while a threaded tool and a subprocess run: the run ends aborted, each
result says what really happened (the thread's outcome follows as `tool:late_result`), and the
command's process is gone. The tools and the test meet through named pipes."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from loopwright.loop.calls import STILL_RUNNING, STOPPED

BOUND = 30.0  # the safety bound of every handshake (a failing test fails instead of hanging)

OPS_PY = """\
from loopwright import Agent, tool
from loopwright.builtins.shell import shell_tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ToolContext

STARTED, PID, RELEASE = {started!r}, {pid!r}, {release!r}


@tool
def watch(ctx: ToolContext) -> str:
    \"\"\"Works in its thread until told to stop, then tidies up until released.\"\"\"
    with open(STARTED, "w") as fifo:
        fifo.write("started\\n")
    told = ctx.cancelled.wait(30)
    with open(RELEASE) as fifo:
        fifo.read()
    return "stopped when told" if told else "never told"


def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return Reply(text="both done")
    command = f"echo $$ > {{PID}}; exec sleep 600"
    calls = (ToolCall(id="w", name="watch", args={{}}),
             ToolCall(id="s", name="shell", args={{"command": command}}))
    return Reply(tool_calls=calls)


agent = Agent(name="ops", model=FunctionModel(reply), tools=[watch, shell_tool({workspace!r})])
"""


def in_thread(work: Any) -> Any:
    """Start `work` in a daemon thread; the returned join gives its result (bounded)."""
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(work()), daemon=True)
    worker.start()

    def join() -> Any:
        worker.join(BOUND)
        assert got, "the thread did not finish"
        return got[0]

    return join


def test_a_cancel_over_http_stops_a_thread_and_a_subprocess(tmp_path: Path):
    from loopwright.project import load_project
    from loopwright.server import create_app
    from test_server import LiveServer, body, check_full
    from test_server_stream import Frames

    pipes = {name: tmp_path / name for name in ("started", "pid", "release")}
    for pipe in pipes.values():
        os.mkfifo(pipe)
    workspace, folder = tmp_path / "work", tmp_path / "project" / "agents" / "ops"
    workspace.mkdir()
    folder.mkdir(parents=True)
    (tmp_path / "project" / "loopwright.toml").write_text("")
    paths = {name: str(path) for name, path in pipes.items()}
    (folder / "agent.py").write_text(OPS_PY.format(workspace=str(workspace), **paths))
    live = LiveServer(create_app(load_project(tmp_path / "project")))
    message = {"message": "go"}
    with (
        live,
        live.client() as http,
        live.client() as other,
        http.stream("POST", "/agents/ops/messages/stream", json=message) as answer,
    ):
        reader = Frames(answer)
        read = reader.read(1)
        sid = read[0]["event"]["sessionId"]
        assert in_thread(pipes["started"].read_text)() == "started\n"
        pid = int(in_thread(pipes["pid"].read_text)())
        os.kill(pid, 0)  # the command runs
        cancelled = in_thread(lambda: other.post(f"/agents/ops/sessions/{sid}/cancel"))
        while not any(f["event"]["type"] == "tool:output" for f in read[1:]):
            read += reader.read(1)  # the cancel's effect, streamed
        pipes["release"].write_text("go on\n")  # the thread tidies up and returns
        read += reader.read()
        assert body(cancelled(), 200) == {"cancelled": True}
    events = [f["event"] for f in read]
    check_full(events, deltas=True)
    found = {e["id"]: e["content"] for e in events if e["type"] == "tool:output"}
    assert found == {"w": STILL_RUNNING, "s": STOPPED}
    assert [(e["id"], e["content"]) for e in events if e["type"] == "tool:late_result"] == [
        ("w", "stopped when told")
    ]
    assert [e["type"] for e in events][-2:] == ["loop:aborted", "done"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped with its group
