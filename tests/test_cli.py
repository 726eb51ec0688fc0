"""The `loopwright` console script, driven in a subprocess the way a person or a program would:
JSON lines for programs, the answer alone on stdout for people, approvals at a real terminal
(a pseudo-terminal), exit statuses, and Ctrl-C."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import V1
from loopwright.testing import check_events
from loopwright.wire import loads

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "examples" / "agents" / "support"
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
if not Path(LOOPWRIGHT).exists():
    LOOPWRIGHT = shutil.which("loopwright") or LOOPWRIGHT
MESSAGE = "Hi, my order A-1001 arrived damaged. Can I get a refund?"
ANSWER = (
    "Done! Your refund of $24.99 for order A-1001 has been issued (refund RF-1001). It should "
    "reach your original payment method within 3–5 business days. Is there anything else I can "
    "help you with?"
)
ENV = {**os.environ, "NO_COLOR": "1"}

AGENT_PY = """\
import dataclasses
import importlib.util
import json
from pathlib import Path

from loopwright.testing import ScriptedModel

spec = importlib.util.spec_from_file_location("support_example", {support!r})
support = importlib.util.module_from_spec(spec)
spec.loader.exec_module(support)
script = json.loads(Path(__file__).with_name("script.json").read_text())
agent = dataclasses.replace(support.agent, model=ScriptedModel.from_script(script))
"""


@pytest.fixture
def make_agent(tmp_path: Path) -> Any:
    """An agent folder with the support example's tools and rules and a script of our own
    (by default the example's script with its typing delays removed, to keep tests fast)."""

    def make(replies: list[Any] | None = None) -> Path:
        if replies is None:
            replies = yaml.safe_load((SUPPORT / "script.yaml").read_text())["replies"]
            replies = [{**reply, "delay": 0} for reply in replies]
        folder = tmp_path / "agent"
        folder.mkdir()
        (folder / "script.json").write_text(json.dumps({"replies": replies}))
        (folder / "agent.py").write_text(AGENT_PY.format(support=str(SUPPORT / "agent.py")))
        return folder

    return make


def loopwright(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOOPWRIGHT, *args],
        cwd=ROOT,
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # (a safety net, as every timeout here)
    )


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_json_prints_one_event_per_line(make_agent):
    out = loopwright("run", str(make_agent()), "--json", "--yes", MESSAGE)
    assert out.returncode == 0, out.stderr
    events = events_of(out.stdout)
    kinds = types(events)
    assert (kinds[0], kinds[-2], kinds[-1]) == ("session", "loop:done", "done")
    assert events[-1] == {"type": "done", "text": ANSWER, "stopReason": "completed"}
    check_events([loads(e) for e in events])
    started = [(e["tool"], e["args"]) for e in events if e["type"] == "tool:started"]
    assert started == [
        ("lookup_order", {"order_id": "A-1001"}),
        ("issue_refund", {"order_id": "A-1001", "amount": 24.99, "reason": "Item arrived damaged"}),
    ]
    assert out.stderr == ""


def test_json_profile_v1_validates_against_the_v1_schema(make_agent):
    out = loopwright("run", str(make_agent()), "--json", "--profile", "v1", "--yes", MESSAGE)
    assert out.returncode == 0, out.stderr
    events = events_of(out.stdout)
    for event in events:
        V1.validate(event)
    assert types(events)[0] == "session"
    assert events[-2:] == [{"type": "loop:done", "text": ANSWER}, {"type": "done", "text": ANSWER}]


def test_human_output_is_the_answer_on_stdout_and_progress_on_stderr(make_agent):
    out = loopwright("run", str(make_agent()), "--yes", MESSAGE)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    assert '→ lookup_order {"order_id": "A-1001"}' in out.stderr
    assert '← lookup_order {"order_id":"A-1001","status":"delivered",' in out.stderr
    assert "→ issue_refund " in out.stderr
    assert "Let me look up order A-1001." in out.stderr
    assert "\x1b[" not in out.stderr  # no colour outside a terminal


def test_without_a_terminal_or_yes_the_run_pauses(make_agent):
    out = loopwright("run", str(make_agent()), MESSAGE)
    assert out.returncode == 3
    assert out.stdout == ""
    assert "paused" in out.stderr and "loopwright approvals" in out.stderr
    assert "? issue_refund needs approval · matched rule 'refunds-need-approval'" in out.stderr


@pytest.mark.parametrize(
    ("agent_py", "error"),
    [
        (None, "no agent folder at"),
        ("", "must export `agent`, a loopwright.Agent (found nothing)"),
        ("agent = 42\n", "must export `agent`, a loopwright.Agent (found a int)"),
        ("raise RuntimeError('boom')\n", "failed to import: RuntimeError: boom"),
        ("from loopwright import Agent\nagent = Agent(model='x', max_turns=0)\n", "max_turns"),
    ],
)
def test_a_bad_agent_is_a_one_line_usage_error(tmp_path, agent_py, error):
    folder = tmp_path / "bad"
    if agent_py is not None:
        folder.mkdir()
        (folder / "agent.py").write_text(agent_py)
    out = loopwright("run", str(folder), "hello")
    assert out.returncode == 2
    first, *rest = out.stderr.splitlines()
    assert first.startswith("loopwright: error: ") and error in first
    assert [line.split(":")[0] for line in rest] == ["hint"]
    assert out.stdout == ""


def test_a_missing_message_is_a_usage_error(make_agent):
    out = loopwright("run", str(make_agent()))
    assert out.returncode == 2
    assert out.stderr.startswith("loopwright: error: no message to send\n")


CUT = [{"text": "It was the best of", "stop_reason": "max_tokens", "delay": 0}]


def test_a_cut_answer_exits_7_with_the_text_so_far(make_agent):
    out = loopwright("run", str(make_agent(CUT)), "--yes", MESSAGE)
    assert (out.returncode, out.stdout) == (7, "It was the best of\n")
    assert "! the reply was cut by the output limit (not continued)" in out.stderr


def test_a_cut_answer_in_json_ends_max_tokens_and_v1_sees_completed(make_agent):
    folder = make_agent(CUT)
    out = loopwright("run", str(folder), "--json", MESSAGE)
    assert out.returncode == 7, out.stderr
    events = events_of(out.stdout)
    check_events([loads(e) for e in events])
    assert events[-3:] == [
        {"type": "message:truncated", "detail": "max_tokens"},
        {"type": "loop:done", "text": "It was the best of"},
        {"type": "done", "text": "It was the best of", "stopReason": "max_tokens"},
    ]
    out = loopwright("run", str(folder), "--json", "--profile", "v1", MESSAGE)
    assert out.returncode == 0, out.stderr  # as before: v1 calls the run completed
    events = events_of(out.stdout)
    for event in events:
        V1.validate(event)
    assert events[-2:] == [
        {"type": "loop:done", "text": "It was the best of"},
        {"type": "done", "text": "It was the best of"},
    ]


def test_help_documents_the_exit_statuses():
    out = loopwright("--help")
    assert out.returncode == 0
    assert "exit status:" in out.stdout and "130  cancelled with Ctrl-C" in out.stdout
    assert "  7    the answer was cut by the model's output limit" in out.stdout
    assert loopwright("--version").stdout.startswith("loopwright ")


def test_demo_without_a_terminal_approves_automatically():
    out = loopwright("demo")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    assert "(no terminal: approving automatically" in out.stderr


# ---- at a terminal, and Ctrl-C --------------------------------------------------------------


def spawn(
    agent: Path, *flags: str, stdin: int, stderr: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [LOOPWRIGHT, "run", str(agent), *flags, MESSAGE],
        cwd=ROOT,
        env=ENV,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


@contextmanager
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal in line mode, without echo: each read at the prompt receives one typed
    line; what the command writes to it is read back from the first end (`shown`)."""
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)


def shown(master: int) -> str:
    """What an ended command wrote to the terminal (newlines as it wrote them)."""
    data = b""
    while select.select([master], [], [], 0)[0]:
        chunk = os.read(master, 65536)
        if not chunk:
            break
        data += chunk
    return data.decode().replace("\r\n", "\n")


def in_terminal(agent: Path, *typed: str, json_out: bool = False) -> tuple[int, str, str]:
    """Run with a terminal as stdin and stderr (where the prompt is; stdout is a pipe) and type
    `typed`."""
    flags = ["--json"] if json_out else []
    with terminal() as (keyboard, tty), spawn(agent, *flags, stdin=tty, stderr=tty) as proc:
        os.write(keyboard, "".join(typed).encode())
        out, _ = proc.communicate(timeout=60)
        err = shown(keyboard)
    return proc.returncode, out, err


def test_approving_at_the_terminal_completes_the_run(make_agent):
    code, out, err = in_terminal(make_agent(), "a\n")
    assert code == 0, err
    assert out == ANSWER + "\n"
    assert "? issue_refund needs your approval · matched rule 'refunds-need-approval'" in err
    assert '  arguments: {"order_id": "A-1001", "amount": 24.99' in err
    assert err.count("[a]pprove / [d]eny / [e]dit arguments? ") == 1
    assert "→ issue_refund" in err


def test_denying_at_the_terminal_stops_the_run(make_agent):
    code, out, err = in_terminal(make_agent(), "d\n", json_out=True)
    assert code == 4, err
    events = events_of(out)
    check_events([loads(e) for e in events])
    assert types(events)[-2:] == ["loop:denied", "done"]
    assert events[-1]["stopReason"] == "denied"
    assert [e["tool"] for e in events if e["type"] == "tool:started"] == ["lookup_order"]


def test_editing_at_the_terminal_asks_again_until_the_arguments_are_valid(make_agent):
    typed = [
        "e\n",
        "{oops\n",  # not JSON: the prompt asks again at once
        '{"amount": "lots"}\n',  # JSON, but the loop refuses it: asked again with the reason
        "e\n",
        '{"amount": 10, "reason": "partial refund"}\n',  # changes merge into the arguments
    ]
    code, out, err = in_terminal(make_agent(), *typed, json_out=True)
    assert code == 0, err
    assert "✗ not valid JSON" in err
    assert "✗ edited arguments are invalid: amount: Input should be a valid number" in err
    events = events_of(out)
    check_events([loads(e) for e in events])
    edited = {"order_id": "A-1001", "amount": 10, "reason": "partial refund"}
    resolved = [e for e in events if e["type"] == "approval:resolved"]
    assert [(r["decision"], r["args"]) for r in resolved] == [("approve", edited)]
    started = [e["args"] for e in events if e["type"] == "tool:started"]
    assert started[-1] == edited
    assert events[-1]["stopReason"] == "completed"


def interrupt_after(proc: subprocess.Popen[str], wanted: str, nth: int = 1) -> list[dict[str, Any]]:
    """Read JSON lines until the `nth` event of type `wanted`, then send SIGINT (Ctrl-C); the
    events of the whole run."""
    assert proc.stdout is not None
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            nth -= json.loads(line)["type"] == wanted
            if nth == 0:
                proc.send_signal(signal.SIGINT)
                break
        rest, _ = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
    return events_of("".join(lines) + rest)


def test_ctrl_c_cancels_a_running_step(make_agent):
    lookup = {"name": "lookup_order", "args": {"order_id": "A-1001"}}
    agent = make_agent([{"text": "Let me look.", "tool_calls": [lookup]}, {"stall": 3600}])
    with spawn(agent, "--json", stdin=subprocess.DEVNULL) as proc:
        events = interrupt_after(proc, "budget:check", nth=2)  # the stalled second request
    assert proc.returncode == 130
    check_events([loads(e) for e in events])
    assert types(events)[-2:] == ["loop:aborted", "done"]
    assert events[-1]["stopReason"] == "aborted"


def test_ctrl_c_at_the_approval_prompt_cancels_at_once(make_agent):
    # the prompt is up once the item is recorded (pending:requested), not at its announcement
    with terminal() as (_, tty), spawn(make_agent(), "--json", stdin=tty) as proc:
        events = interrupt_after(proc, "pending:requested")
    assert proc.returncode == 130
    assert types(events)[-2:] == ["loop:aborted", "done"]


def test_ctrl_c_at_the_approval_prompt_keeps_the_event_grammar(make_agent):
    with terminal() as (_, tty), spawn(make_agent(), "--json", stdin=tty) as proc:
        events = interrupt_after(proc, "pending:requested")
    check_events([loads(e) for e in events])
