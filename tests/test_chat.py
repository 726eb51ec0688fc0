"""`loopwright chat` in a real terminal (tmux, `chat_terminal.Pane`): a conversation with an
approval answered inline, Ctrl-C mid-run and the conversation resumed by a new chat, Markdown
rendered, multi-line input and history, the slash commands; and the chat extra's absence."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chat_terminal import Pane, needs_tmux
from loopwright.cli.common import user_name
from test_cli import LOOPWRIGHT

SRC = str(Path(__file__).resolve().parent.parent / "src")
ENV = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_HOME", "NO_COLOR")} | {
    "PYTHONPATH": SRC,
    "TERM": "xterm-256color",
    "COLUMNS": "100",  # the pane's width (rich reads it, whatever the pane's size at the start)
    "LINES": "30",
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


@needs_tmux
def test_markdown_is_rendered_not_shown_raw(chat) -> None:
    pane = chat("refunds", "--new")
    pane.wait("/help for help")
    pane.type("report please")
    screen = pane.wait(lambda s: "— 1 model request" in s and s.endswith("\n›"))
    shown = "\n".join(after(screen, "› report please")[2:-2])
    assert "Weekly report" in shown and "# Weekly report" not in shown  # a heading
    assert re.search(r"^ *city +sales *$", shown, re.M) and "Oslo  12" in shown  # a table
    assert "|---|" not in shown and "| city |" not in shown and "───" in shown
    assert "print(42)" in shown and "```" not in shown  # a code fence


@needs_tmux
def test_multi_line_input_and_history_across_chats(chat, project: Path) -> None:
    pane = chat("refunds", "--new")
    pane.wait("/help for help")
    pane.type("first line\\")  # a trailing backslash goes on to the next line
    pane.type("second line", enter=False)
    pane.keys("M-Enter")  # so does Alt-Enter
    pane.type("third line")
    screen = pane.wait(lambda s: "— 1 model request" in s and s.endswith("\n›"))
    session = conversation_of(screen)
    [received] = [e for e in stored(project, session) if e["type"] == "input:received"]
    assert received["message"]["content"] == "first line\nsecond line\nthird line"
    pane.keys("C-d")
    pane.wait("[exit 0]")
    again = chat("refunds")
    again.wait("/help for help")
    again.keys("Up")  # the history is kept in a file beside the event log
    again.wait(lambda s: s.endswith("… third line"))
    assert (project / ".loopwright" / "chat_history").is_file()


@needs_tmux
def test_the_slash_commands(chat, project: Path) -> None:
    pane = chat("refunds", "--new")
    pane.wait("/help for help")
    pane.type("/help")
    pane.wait("  /resume ID    continue conversation ID")
    pane.type("hello one")
    first = conversation_of(pane.wait("heard: hello one\n"))
    pane.type("/cost")
    pane.wait("this conversation: 1 model request · 100 in · 20 out · $0.0015")
    pane.type("/new")
    pane.wait("a new conversation starts with your next message")
    pane.type("hello two")
    screen = pane.wait("heard: hello two\n")  # a new conversation: the first is not heard
    (second,) = set(re.findall(r"conversation ([0-9a-f]{32})", screen)) - {first}
    pane.type("/sessions")
    screen = pane.wait(lambda s: "FIRST MESSAGE" in s and s.endswith("\n›"))
    rows = after(screen, "› /sessions")[1:-1]
    assert rows[0].split() == ["ID", "STATUS", "UPDATED", "FIRST", "MESSAGE"]
    assert [r.split()[:2] for r in rows[1:]] == [["*", second], [first, "idle"]]
    assert [r.split()[-2:] for r in rows[1:]] == [["hello", "two"], ["hello", "one"]]
    pane.type(f"/resume {first}")
    pane.wait(f"refunds · conversation {first} (idle")
    pane.type("/fork")
    screen = pane.wait("you are in the fork")
    (forked,) = re.findall(r"forked this conversation as ([0-9a-f]{32})", screen)
    pane.type("again")
    pane.wait("heard: hello one | again\n")  # the fork goes on from the first conversation
    pane.type("/nope")
    pane.wait("error: unknown command /nope")
    pane.type("/resume missing")
    pane.wait("error: no conversation 'missing'")
    listed = lw(project, "sessions", "--agent", "refunds", "--json")
    rows_by_id = {json.loads(line)["id"]: json.loads(line) for line in listed.stdout.splitlines()}
    assert rows_by_id[forked]["forked_from"]["session"] == first
    inputs = [
        e["message"]["content"] for e in stored(project, first) if e["type"] == "input:received"
    ]
    assert inputs == ["hello one"]  # the original is untouched


def test_chat_without_its_extra_is_a_clear_error(project: Path) -> None:
    blocked = "import sys; sys.modules['prompt_toolkit'] = None\n"
    code = blocked + "from loopwright.cli.main import main; sys.exit(main())"
    out = subprocess.run(
        [sys.executable, "-c", code, "chat", "refunds"],
        cwd=project, env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        "loopwright: error: `loopwright chat` needs prompt_toolkit, which is not installed\n"
        "hint: install the chat extra: pip install 'loopwright[chat]'\n"
    )


def test_other_commands_do_not_load_the_chat_libraries(project: Path) -> None:
    code = (
        "import sys\nfrom loopwright.cli.main import main\ncode = main()\n"
        "print(sorted(m for m in ('prompt_toolkit', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "agents"],
        cwd=project, env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"
