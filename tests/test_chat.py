"""`loopwright chat` in a real terminal (tmux, `chat_terminal.Pane`): a conversation with an
approval answered inline, Ctrl-C mid-run and the conversation resumed by a new chat, Markdown
rendered, multi-line input and history, the slash commands; and the chat extra's absence."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from chat_terminal import Pane, needs_tmux
from loopwright.cli.common import user_name
from test_cli import LOOPWRIGHT

SRC = str(Path(__file__).resolve().parent.parent / "src")
ENV = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_HOME", "NO_COLOR")} | {
    "PYTHONPATH": SRC,
    "TERM": "xterm-256color",
}

AGENT_PY = '''\
import asyncio
from pathlib import Path

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.testing import FunctionModel, Reply

REPORT = "# Weekly report\\n\\n| city | sales |\\n|---|---|\\n| Oslo | 12 |\\n\\n```python\\nprint(42)\\n```\\n"
USAGE = Usage(input_tokens=100, output_tokens=20, cost=0.0015)


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: The order's id.
        amount: How much to refund.
    """
    return f"refunded {amount} on {order}"


async def reply(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"Done: {last.content}", usage=USAGE)
    if last.content.startswith("refund"):
        call = ToolCall(id="r1", name="refund", args={"order": "A-1", "amount": 5})
        return Reply(text="Refunding.", tool_calls=(call,), usage=USAGE)
    if last.content.startswith("report"):
        return Reply(text=REPORT, usage=USAGE)
    if last.content.startswith("slow"):
        await asyncio.Event().wait()  # until Ctrl-C cancels the run
    said = [m.content for m in request.messages if isinstance(m, UserMessage)]
    return Reply(text="heard: " + " | ".join(said), usage=USAGE)


agent = Agent(
    name="refunds",
    model=FunctionModel(reply),
    tools=[refund],
    rules=Path(__file__).with_name("rules.yaml"),
)
'''
RULES = "default_decision: ask\nrules:\n  - {name: refunds-need-approval, tool: refund, decision: ask}\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "agents" / "refunds").mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    (root / "agents" / "refunds" / "agent.py").write_text(AGENT_PY)
    (root / "agents" / "refunds" / "rules.yaml").write_text(RULES)
    return root


@pytest.fixture
def chat(project: Path, tmp_path: Path):
    """Starts `loopwright chat ARGS` in a pane of its own; all are closed at the test's end."""
    panes: list[Pane] = []

    def start(*args: str) -> Pane:
        home = tmp_path / f"tmux{len(panes)}"
        home.mkdir()
        pane = Pane(home, [LOOPWRIGHT, "chat", *args], project, ENV)
        panes.append(pane)
        return pane

    yield start
    for pane in panes:
        pane.close()


def lw(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOOPWRIGHT, *args], cwd=project, env=ENV, capture_output=True, text=True, timeout=60
    )


def stored(project: Path, session: str) -> list[dict]:
    out = lw(project, "sessions", "export", session, "--agent", "refunds")
    assert out.returncode == 0, out.stderr
    return [json.loads(line)["event"] for line in out.stdout.splitlines()]


def conversation_of(screen: str) -> str:
    (session,) = set(re.findall(r"conversation ([0-9a-f]{32})", screen))
    return session


def after(screen: str, mark: str) -> list[str]:
    """The screen's lines from the last one starting with `mark` (a typed line) on."""
    lines = screen.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith(mark))
    return lines[start:]


def turn_line(requests: int) -> str:
    s = "s" if requests != 1 else ""
    cost = f"${0.0015 * requests:.4f}"
    return f"— {requests} model request{s} · {100 * requests} in · {20 * requests} out · {cost} · "


@needs_tmux
def test_a_conversation_with_an_approval_answered_inline(chat, project: Path) -> None:
    pane = chat("refunds")
    pane.wait("refunds · a new conversation · /help for help")
    pane.type("refund order A-1 please")
    pane.wait("[a]pprove / [d]eny / [e]dit arguments?")
    pane.type("a")
    screen = pane.wait(lambda s: "— 2 model requests" in s and s.endswith("›"))
    lines = after(screen, "› refund order A-1 please")
    assert lines[1] == f"(conversation {conversation_of(screen)})"
    assert lines[2:-2] == [
        "Refunding.",
        "? refund needs your approval · matched rule 'refunds-need-approval'",
        '  arguments: {"order": "A-1", "amount": 5}',
        "  [a]pprove / [d]eny / [e]dit arguments? a",
        f"  refund approved by {user_name()}",
        '╭─ refund {"order": "A-1", "amount": 5} ─╮',
        "│ refunded 5.0 on A-1                    │",
        "╰────────────────────────────────────────╯",
        "Done: refunded 5.0 on A-1",
    ]
    assert lines[-2].startswith(turn_line(2)) and lines[-1] == "›"
    events = stored(project, conversation_of(screen))
    [resolved] = [e for e in events if e["type"] == "approval:resolved"]
    assert (resolved["decision"], resolved["by"]) == ("approve", user_name())
    assert [e["type"] for e in events if e["type"] in ("tool:started", "done")] == [
        "tool:started",
        "done",
    ]
    assert events[-1]["stopReason"] == "completed"


@needs_tmux
def test_ctrl_c_stops_the_run_and_a_new_chat_resumes_the_conversation(chat, project) -> None:
    pane = chat("refunds")
    pane.wait("/help for help")
    pane.type("hello")
    pane.wait("heard: hello\n")
    pane.type("slow answer please")
    pane.wait("thinking ·")  # the spinner, while the model works
    pane.keys("C-c")
    screen = pane.wait(lambda s: "✗ cancelled" in s and s.endswith("\n›"))
    session = conversation_of(screen)
    lines = after(screen, "› slow answer please")
    assert lines[1] == "✗ cancelled" and lines[2].startswith(
        "— 0 model requests · 0 in · 0 out · $0 · "
    )
    pane.keys("C-d")
    pane.wait("[exit 0]")
    events = stored(project, session)
    assert [e["type"] for e in events][-2:] == ["loop:aborted", "done"]
    assert events[-1]["stopReason"] == "aborted"

    again = chat("refunds")  # a new process: it continues the newest conversation
    screen = again.wait("/help for help")
    assert screen.splitlines()[0].startswith(f"refunds · conversation {session} (")
    again.type("and now?")
    screen = again.wait("heard: hello | slow answer please | and now?")
    assert conversation_of(screen) == session
    assert [e["type"] for e in stored(project, session)][-2:] == ["loop:done", "done"]
