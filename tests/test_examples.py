"""The examples folder is a project (examples/loopwright.toml, examples/agents/): `loopwright
serve --project examples` serves every example agent, and each one runs to the end of its script
over HTTP (approving the support agent's refund, answering the concierge's question), through
the CLI and through the Python API, offline. A folder without agents is refused, not served."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from conftest import drive
from loopwright import Answer, Approval, Session
from loopwright.approvals import ApprovalRequest, QuestionRequest
from loopwright.project import load_project

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
AGENTS = ["concierge", "payments", "support", "writer"]
MESSAGES = {
    "support": "Hi, my order A-1001 arrived damaged. Can I get a refund?",
    "concierge": "Hi! Could I get an invoice for one of my orders?",
    "writer": "Please write the release notes for version 1.2.0.",
    "payments": "Please pay invoice INV-7: 120 EUR.",
}
NOTES = Path("agents/writer/workspace/release-notes/1.2.0.md")


def copy_examples(where: Path) -> Path:
    """A copy of examples/: running an example writes a store (and the writer's notes) into
    the project, which must not happen to the repository's own folder."""
    target = where / "examples"

    def leave_out(folder: str, names: list[str]) -> set[str]:
        made = {".loopwright", "__pycache__"} | (
            {"release-notes"} if folder.endswith("workspace") else set()
        )
        return made & set(names)

    shutil.copytree(EXAMPLES, target, ignore=leave_out)
    return target


def script(*folder: str) -> list[dict[str, Any]]:
    """An example agent's scripted replies (a subagent's: its folder below the agent's)."""
    path = EXAMPLES / "agents" / Path(*folder) / "script.yaml"
    replies = yaml.safe_load(path.read_text())["replies"]
    return [{"text": r} if isinstance(r, str) else r for r in replies]


def last_text(*folder: str) -> str:
    return str(script(*folder)[-1]["text"])


def calls(*folder: str) -> list[str]:
    """The tools a script calls, in order."""
    return [c["name"] for reply in script(*folder) for c in reply.get("tool_calls", ())]


def written_notes() -> str:
    [write] = [
        c for r in script("writer") for c in r.get("tool_calls", ()) if c["name"] == "write_file"
    ]
    assert write["args"]["path"] == "release-notes/1.2.0.md"
    return str(write["args"]["content"])


def started(events: list[dict[str, Any]]) -> list[str]:
    return [e["tool"] for e in events if e["type"] == "tool:started"]


def test_the_example_agents_are_the_ones_tested_here():
    folders = sorted(p.name for p in (EXAMPLES / "agents").iterdir() if p.is_dir())
    assert folders == AGENTS
    assert sorted(load_project(EXAMPLES).agents) == AGENTS


# ---- `loopwright serve --project examples`, over HTTP ------------------------------------------


class Served:
    """`loopwright serve --project DIR --port 0` in a subprocess; ready once it printed its
    playground URL (it listens before it prints, so requests wait for the app)."""

    def __init__(self, project: Path) -> None:
        self.process = subprocess.Popen(
            [LOOPWRIGHT, "serve", "--project", str(project), "--port", "0"],
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        stderr = self.process.stderr
        assert stderr is not None
        self.reader = threading.Thread(target=lambda: [self.lines.put(x) for x in stderr])
        self.reader.start()
        self.banner = self.line("loopwright: serving")
        self.url = re.fullmatch(r"playground: (\S+)/playground", self.line("playground: "))[1]  # type: ignore[index]

    def line(self, start: str) -> str:
        """The next stderr line, which must start with `start` (bounded by a timeout that
        only fails the test; nothing waits on the clock)."""
        try:
            line = self.lines.get(timeout=60).rstrip("\n")
        except queue.Empty:
            raise AssertionError(f"no line starting with {start!r} from the server") from None
        assert line.startswith(start), line
        return line

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=60)
        self.reader.join()
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    project = copy_examples(tmp_path_factory.mktemp("served"))
    server = Served(project)
    try:
        assert server.banner.startswith(
            "loopwright: serving 4 agent(s) (concierge, payments, support, writer) at "
            "http://127.0.0.1:"
        )
        with httpx.Client(base_url=server.url, timeout=60) as http:
            yield http, project
    finally:
        code = server.stop()
    assert code == 0
    assert server.lines.get_nowait().startswith("loopwright: stopping")


def test_serve_lists_every_example_agent(served):
    http, _ = served
    agents = http.get("/agents").json()["agents"]
    assert [a["name"] for a in agents] == AGENTS
    assert all(a["description"] for a in agents)  # what the playground shows for each
    config = http.get("/agents/concierge/config").json()
    assert config["subagents"] == ["billing"]
    assert [t["name"] for t in config["tools"]] == ["list_orders", "ask_user", "billing"]
    config = http.get("/agents/writer/config").json()
    assert config["skills"] == [
        {
            "name": "release-notes",
            "description": "How to write a version's release notes (sections, order, tone). "
            "Pass the version.",
        }
    ]
    assert [t["name"] for t in config["tools"]] == [
        "read_file", "list_files", "write_file", "edit_file", "Skill"
    ]  # fmt: skip
    assert http.get("/playground").status_code == 200


def test_the_support_agent_refunds_once_approved_in_two_conversations_of_one_server(served):
    """The support agent's one scripted model (agent.py) serves every session: each
    conversation hears the script from the top."""
    http, _ = served
    sessions = set()
    for _ in range(2):
        paused = http.post("/agents/support/messages", json={"message": MESSAGES["support"]})
        assert paused.status_code == 202, paused.text
        body = paused.json()
        assert (body["type"], body["tool"], body["args"]) == (
            "approval",
            "issue_refund",
            {"order_id": "A-1001", "amount": 24.99, "reason": "Item arrived damaged"},
        )
        assert body["reason"] == "matched rule 'refunds-need-approval'"
        done = http.post(body["approveUrl"], json={"by": "ana"})
        assert done.status_code == 200, done.text
        final = done.json()
        assert (final["stopReason"], final["text"]) == ("completed", last_text("support"))
        assert started(final["events"]) == calls("support") == ["lookup_order", "issue_refund"]
        outputs = [e["content"] for e in final["events"] if e["type"] == "tool:output"]
        assert '"refund_id":"RF-1001"' in outputs[-1], outputs
        sessions.add(final["sessionId"])
    assert len(sessions) == 2


def test_the_concierge_asks_which_order_then_billing_makes_the_invoice(served):
    http, _ = served
    paused = http.post("/agents/concierge/messages", json={"message": MESSAGES["concierge"]})
    assert paused.status_code == 202, paused.text
    body = paused.json()
    assert (body["type"], body["options"]) == ("question", ["A-1001", "A-1002"])
    assert body["question"].endswith("Which one is the invoice for?")
    assert started(body["events"]) == ["list_orders"]
    done = http.post(body["answerUrl"], json={"answer": "A-1002"})
    assert done.status_code == 200, done.text
    final = done.json()
    assert (final["stopReason"], final["text"]) == ("completed", last_text("concierge"))
    assert started(final["events"]) == calls("concierge") == ["list_orders", "ask_user", "billing"]
    inner = [e["event"] for e in final["events"] if e["type"] == "subagent:event"]
    assert {e["origin"]["agent"] for e in final["events"] if "origin" in e} == {"billing"}
    assert started(inner) == calls("concierge", "subagents", "billing") == ["create_invoice"]
    assert [e["text"] for e in inner if e["type"] == "loop:done"] == [
        last_text("concierge", "subagents", "billing")
    ]
    answers = [e["content"] for e in final["events"] if e["type"] == "tool:output"]
    assert answers[-2:] == ["A-1002", last_text("concierge", "subagents", "billing")]


def test_the_writer_loads_its_skill_and_writes_in_its_workspace(served):
    http, project = served
    done = http.post("/agents/writer/messages", json={"message": MESSAGES["writer"]})
    assert done.status_code == 200, done.text
    final = done.json()
    assert (final["stopReason"], final["text"]) == ("completed", last_text("writer"))
    events = final["events"]
    assert started(events) == calls("writer")
    assert calls("writer") == ["Skill", "list_files", "read_file", "write_file"]
    assert [e["skill"] for e in events if e["type"] == "skill:loaded"] == ["release-notes"]
    outputs = [e["content"] for e in events if e["type"] == "tool:output"]
    assert outputs[0].startswith("# Release notes for version 1.2.0\n")  # $1 filled in
    assert outputs[1] == "CHANGES.txt"
    assert outputs[3] == f"Created release-notes/1.2.0.md ({len(written_notes())} characters)."
    assert (project / NOTES).read_text() == written_notes()


# ---- the CLI and the Python API -----------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`loopwright ARGS` in a folder, run in this process: (exit status, stdout, stderr)."""
    from loopwright.cli.main import main

    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")

    def run(cwd: Path, *args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_each_example_runs_from_the_cli(tmp_path, cli):
    project = copy_examples(tmp_path)
    code, out, err = cli(project, "run", "support", MESSAGES["support"], "--yes")
    assert (code, out.strip()) == (0, last_text("support")), err
    code, out, err = cli(project, "run", "writer", MESSAGES["writer"])
    assert (code, out.strip()) == (0, last_text("writer")), err
    assert (project / NOTES).read_text() == written_notes()
    code, out, err = cli(project, "run", "concierge", MESSAGES["concierge"])
    assert code == 3, err  # no terminal to answer the question here: the run pauses
    [item] = re.findall(r"^  question (q_\S+): ", err, re.MULTILINE)
    code, out, err = cli(project, "approvals", "answer", item, "A-1002")
    assert (code, out.strip()) == (0, last_text("concierge")), err


def human(request: ApprovalRequest | QuestionRequest) -> Approval | Answer:
    if isinstance(request, QuestionRequest):
        assert request.options == ["A-1001", "A-1002"]
        return Answer(text="A-1002")
    assert request.call.name == "issue_refund"
    return Approval.approve(by="ana")


@pytest.mark.parametrize("name", AGENTS)
async def test_each_example_runs_from_python(tmp_path, name):
    project = load_project(copy_examples(tmp_path))
    result = await drive(Session(project.agent(name)).run(MESSAGES[name], approver=human))
    assert (result.stop_reason, result.text) == ("completed", last_text(name))
    assert [e.tool for e in result.events if e.type == "tool:started"] == calls(name)


# ---- a folder without agents is refused --------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_serving_a_folder_without_agents_is_refused(tmp_path, cli, command, monkeypatch):
    from loopwright.cli import serve

    monkeypatch.setattr(serve, "_listen", lambda *_: pytest.fail("it listened: it would serve"))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "loopwright.toml").write_text("")
    for folder_made in (False, True):
        if folder_made:
            (empty / "agents").mkdir()  # an agents/ folder with no agent in it: the same
        assert cli(tmp_path, command, "--project", "empty", "--port", "0") == (
            2,
            "",
            f"loopwright: error: no agents to serve in {empty.resolve()} (an agent is a folder "
            "agents/NAME/ holding agent.yaml or agent.py)\n"
            "hint: create one with `loopwright new NAME --project empty`, then serve again\n",
        )
    code, _, err = cli(empty, command, "--port", "0")  # the current directory: no --project
    assert code == 2
    assert err.endswith("hint: create one with `loopwright new NAME`, then serve again\n")
