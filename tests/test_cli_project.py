"""The `loopwright` console script on a project, driven in subprocesses the way a person would:
`init`, `new`, `agents`, `run` by name (durable sessions, `--session`, `--resume`), a paused run
resolved from a second process with `approvals`, `sessions`, and discovery errors."""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from test_cli import LOOPWRIGHT

ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
HELLO = "Hello! I am example, running on a scripted model."

# An agent whose model is a function of the conversation, so that a run resumed in another
# process (or a second turn) answers from what the store holds, not from a script position.
REFUNDS_PY = '''\
from pathlib import Path

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage, UserMessage
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ask_user


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: The order's id.
        amount: How much to refund.
    """
    return f"refunded {amount} on {order}"


def reply(request):
    last = request.messages[-1]
    n = len(request.messages)
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"Done: {last.content}")
    if last.content.startswith("refund"):
        call = ToolCall(id=f"r{n}", name="refund", args={"order": "A-1", "amount": 5})
        return Reply(text="Refunding.", tool_calls=(call,))
    if last.content.startswith("ask"):
        call = ToolCall(id=f"q{n}", name="ask_user", args={"question": "Which colour?"})
        return Reply(tool_calls=(call,))
    said = [m.content for m in request.messages if isinstance(m, UserMessage)]
    return Reply(text="heard: " + " | ".join(said))


agent = Agent(
    name="refunds",
    description="Refunds orders (a human approves each refund).",
    model=FunctionModel(reply),
    tools=[refund, ask_user],
    rules=Path(__file__).with_name("rules.yaml"),
)
'''
REFUNDS_RULES = """\
default_decision: ask
rules:
  - {name: questions, tool: ask_user, decision: allow}
  - {name: refunds-need-approval, tool: refund, decision: ask}
"""


def lw(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOOPWRIGHT, *args],
        cwd=cwd,
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )


def ok(out: subprocess.CompletedProcess[str], code: int = 0) -> subprocess.CompletedProcess[str]:
    assert out.returncode == code, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def one_error(out: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """A usage error: exit 2, one `loopwright: error:` line and one `hint:` line."""
    assert out.returncode == 2, out.stderr
    first, *rest = out.stderr.splitlines()
    assert first.startswith("loopwright: error: "), out.stderr
    assert [line.split(":")[0] for line in rest] == ["hint"], out.stderr
    for fragment in fragments:
        assert fragment in first
    return first


def new_project(root: Path) -> Path:
    ok(lw(root.parent, "init", root.name))
    (root / "agents" / "refunds").mkdir()
    (root / "agents" / "refunds" / "agent.py").write_text(REFUNDS_PY)
    (root / "agents" / "refunds" / "rules.yaml").write_text(REFUNDS_RULES)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_project(tmp_path_factory.mktemp("p") / "shop")


def paused(project: Path, message: str = "refund A-1") -> tuple[str, str, str]:
    """Start a run that pauses on an approval; (session id, pending id, stderr)."""
    out = ok(lw(project, "run", "refunds", message), 3)
    session = re.search(r"^session (\w+) \(continue with --session \1\)$", out.stderr, re.M)
    pending = re.search(r"loopwright approvals (?:approve|answer) (\S+)", out.stderr)
    assert session and pending, out.stderr
    return session.group(1), pending.group(1), out.stderr


def items(project: Path, session: str) -> list[dict[str, Any]]:
    out = ok(lw(project, "approvals", "--session", session, "--json"))
    return [json.loads(line) for line in out.stdout.splitlines()]


# ---- init, new, agents ---------------------------------------------------------------------


def test_init_new_and_agents_show(tmp_path):
    root = tmp_path / "proj"
    out = ok(lw(tmp_path, "init", "proj"))
    assert "agents/example/" in out.stdout
    assert "[defaults]" in (root / "loopwright.toml").read_text()
    assert ".loopwright/" in (root / ".gitignore").read_text().splitlines()
    one_error(lw(tmp_path, "init", "proj"), "loopwright.toml already exists")

    ok(lw(root, "new", "order-desk", "--description", "Answers order questions."))
    ok(lw(root, "new", "order-desk/helper"))
    for name in ("agent.yaml", "tools.py", "rules.yaml", "script.yaml"):
        assert (root / "agents" / "order-desk" / "subagents" / "helper" / name).is_file()

    listing = ok(lw(root, "agents")).stdout.splitlines()
    assert listing[0].split() == ["NAME", "MODEL", "DESCRIPTION"]
    assert listing[1].split()[:2] == ["example", "scripted:agents/example/script.yaml"]
    assert listing[2].split("  ")[-1].strip() == "Answers order questions."

    shown = ok(lw(root, "agents", "--show", "order-desk")).stdout
    assert "model: scripted:agents/order-desk/script.yaml" in shown
    assert "  You are order-desk, a helpful assistant." in shown
    assert "limits: max_turns=10 · on_deny=stop" in shown
    assert "  echo — Repeat a text back" in shown
    assert '"description": "What to repeat."' in shown  # the tool's JSON schema
    assert "rules: agents/order-desk/rules.yaml · default decision: ask" in shown
    assert "  echo-freely: echo → allow" in shown
    assert "skills: none" in shown and "subagents: helper" in shown
    config = json.loads(ok(lw(root, "agents", "--show", "order-desk", "--json")).stdout)
    assert config["tools"][0]["parameters"]["required"] == ["text"]
    assert config["rules"]["rules"][0]["name"] == "echo-freely"
    one_error(lw(root, "agents", "--show", "nope"), "no agent named 'nope'", "example")


def test_new_never_overwrites_and_checks_names(project):
    before = (project / "agents" / "example" / "agent.yaml").read_text()
    one_error(lw(project, "new", "example"), "agents/example already exists")
    assert (project / "agents" / "example" / "agent.yaml").read_text() == before
    for bad in ("Bad_Name", "two--hyphens", "-x", "a/b/"):
        out = lw(project, "new", bad)
        assert out.returncode == 2, (bad, out.stderr)
    one_error(lw(project, "new", "Order"), "invalid agent name 'Order'", "lowercase words")
    one_error(lw(project, "new", "ghost/child"), "no parent agent at agents/ghost")
    one_error(lw(project.parent, "new", "x"), "is not a loopwright project")


def test_a_discovery_error_is_one_line_with_file_and_line(tmp_path):
    root = tmp_path / "broken"
    ok(lw(tmp_path, "init", "broken"))
    tools = root / "agents" / "example" / "tools.py"
    tools.write_text("from loopwright import tool\n\nx = 1\nundefined_name()\n")
    for args in (["run", "example", "hi"], ["agents"]):
        one_error(lw(root, *args), "agents/example/tools.py:4: NameError")


# ---- run by name, sessions -------------------------------------------------------------------


def test_run_by_name_with_json(project):
    out = ok(lw(project, "run", "example", "--json", "hello"))
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[-1]["type"] == "done"
    assert events[-1]["stopReason"] == "completed" and events[-1]["text"].startswith(HELLO)
    assert out.stderr == ""  # the session id is in the first event
    human = ok(lw(project, "run", "example", "hello"))
    assert human.stdout.startswith(HELLO)
    assert re.match(r"session (\w+) \(continue with --session \1\)\n", human.stderr)


def test_session_continues_a_conversation(project):
    first = ok(lw(project, "run", "refunds", "my name is Ada"))
    assert first.stdout == "heard: my name is Ada\n"
    session = first.stderr.split()[1]
    second = ok(lw(project, "run", "refunds", "--session", session, "--input", "who am I?"))
    assert second.stdout == "heard: my name is Ada | who am I?\n"
    assert "session" not in second.stderr  # no new session
    # ids belong to (tenant, agent): the same id under another agent is another session
    other = ok(lw(project, "run", "example", "--new", "--session", session, "hi"))
    assert other.stdout.startswith(HELLO)
    assert other.stderr == f"session {session} (continue with --session {session})\n"
    third = ok(lw(project, "run", "refunds", "--session", session, "--input", "and you?"))
    assert third.stdout == "heard: my name is Ada | who am I? | and you?\n"
    one_error(lw(project, "sessions", "show", session), "used by several agents (example, refunds)")
    shown = ok(lw(project, "sessions", "show", session, "--agent", "example")).stdout
    assert shown.splitlines()[:2] == [shown.splitlines()[0], "user: hi"]
    assert shown.startswith(f"session {session} · agent example · idle")
    exported = ok(lw(project, "sessions", "export", session, "--agent", "refunds")).stdout
    inputs = [json.loads(line)["event"] for line in exported.splitlines()]
    assert [e["message"]["content"] for e in inputs if e["type"] == "input:received"] == [
        "my name is Ada",
        "who am I?",
        "and you?",
    ]


def test_sessions_list_show_and_export(project, tmp_path):
    first = ok(lw(project, "run", "refunds", "hello there"))
    session = first.stderr.split()[1]
    listing = ok(lw(project, "sessions", "--agent", "refunds")).stdout.splitlines()
    assert listing[0].split() == ["ID", "AGENT", "STATUS", "UPDATED", "LAST", "SEQ", "TITLE"]
    row = next(line.split() for line in listing if line.startswith(session))
    assert row[1:3] == ["refunds", "idle"] and int(row[4]) > 3
    assert row[-2:] == ["hello", "there"]  # its title: its first message (no [titles])
    assert all(line.split()[1] == "refunds" for line in listing[1:])

    shown = ok(lw(project, "sessions", "show", session)).stdout.splitlines()
    assert shown[0].startswith(f"session {session} · agent refunds · idle")
    assert shown[0].endswith(" · title: hello there")
    assert shown[1:-1] == ["user: hello there", "assistant: heard: hello there", "-- run completed"]
    usage = r"usage: 1 model request · \d+ in · \d+ out · no price known \(with its subagents\)"
    assert re.fullmatch(usage, shown[-1]), shown[-1]

    out = tmp_path / "s.jsonl"
    ok(lw(project, "sessions", "export", session, "--out", str(out)))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["event"]["type"] == "session" and lines[-1]["event"]["type"] == "done"
    assert ok(lw(project, "sessions", "export", session)).stdout == out.read_text()
    one_error(lw(project, "sessions", "show", "no-such-session"), "no session")


# ---- durable approvals from a second process ----------------------------------------------


def test_a_paused_run_is_approved_from_another_process_and_completes(project):
    session, pending, err = paused(project)
    assert "paused" in err and "refund" in err
    assert f"  loopwright approvals deny {pending} [--reason TEXT]\n" in err
    assert f'  loopwright approvals edit {pending} \'{{"order": "A-1"}}\'\n' in err
    assert f"  loopwright run refunds --session {session} --resume\n" in err

    table = ok(lw(project, "approvals")).stdout.splitlines()
    assert table[0].split() == ["ID", "KIND", "TOOL", "LABEL", "ARGS", "REASON", "SESSION"]
    row = next(line for line in table if line.startswith(pending))
    assert "approval  refund" in row and '{"order": "A-1", "amount": 5}' in row
    assert "matched rule 'refunds-need-approval'" in row and row.endswith(session)

    done = ok(lw(project, "approvals", "approve", pending, "--by", "ops"))
    assert done.stdout == "Done: refunded 5.0 on A-1\n"
    user = getpass.getuser()  # the terminal's user decides; `--by ops` is only a note
    assert f"{pending}: approved (approval: refund) by {user}" in done.stderr
    assert "→ refund" in done.stderr
    assert items(project, session) == []
    again = ok(lw(project, "approvals", "approve", pending))
    assert f"already resolved (approved by {user}); nothing changed" in again.stderr
    status = ok(lw(project, "sessions", "show", session)).stdout
    assert " · idle · " in status.splitlines()[0] and f"refund approved by {user}" in status


def test_a_denial_from_another_process_stops_the_run(project):
    session, pending, _ = paused(project)
    out = ok(lw(project, "approvals", "deny", pending, "--reason", "too much"), 4)
    assert f"{pending}: denied" in out.stderr and "too much" in out.stderr
    assert out.stdout == ""
    assert items(project, session) == []
    assert "-- run denied" in ok(lw(project, "sessions", "show", session)).stdout


def test_an_edit_is_validated_and_then_completes_the_run(project):
    session, pending, _ = paused(project)
    one_error(lw(project, "approvals", "edit", pending, "{oops"), "not valid JSON")
    huge = '{"amount": 1' + "0" * 5000 + "}"  # past Python's digit limit for an int
    deep = '{"amount": ' + "[" * 3000 + "]" * 3000 + "}"  # past Python's recursion limit
    for bad in (huge, deep):
        one_error(lw(project, "approvals", "edit", pending, bad), "not valid JSON")
    one_error(
        lw(project, "approvals", "edit", pending, '{"amount": "lots"}'),
        "edited arguments are invalid",
        "amount",
    )
    assert [item["id"] for item in items(project, session)] == [pending]  # still open
    out = ok(lw(project, "approvals", "edit", pending, '{"amount": 3}'))
    assert out.stdout == "Done: refunded 3.0 on A-1\n"
    assert "approved with edits" in out.stderr


def test_no_resume_then_run_resume(project):
    session, pending, _ = paused(project)
    one_error(lw(project, "run", "refunds", "--session", session, "hi"), "paused")
    out = ok(lw(project, "approvals", "approve", pending, "--no-resume"))
    assert f"loopwright run refunds --session {session} --resume" in out.stderr
    assert out.stdout == ""
    done = ok(lw(project, "run", "refunds", "--session", session, "--resume", "--json"))
    assert json.loads(done.stdout.splitlines()[-1])["text"] == "Done: refunded 5.0 on A-1"
    one_error(lw(project, "run", "refunds", "--session", session, "--resume"), "no paused run")


def test_a_question_is_answered_from_another_process(project):
    _, pending, err = paused(project, "ask me")
    assert f'loopwright approvals answer {pending} "<your answer>"' in err
    one_error(lw(project, "approvals", "approve", pending), "is a question")
    out = ok(lw(project, "approvals", "answer", pending, "dark", "blue"))
    assert out.stdout == "Done: dark blue\n"
    one_error(lw(project, "approvals", "approve", "apr_unknown"), "no pending item")


def test_a_bare_agent_folder_keeps_its_sessions_in_the_folder(tmp_path):
    folder = tmp_path / "refunds"
    folder.mkdir()
    (folder / "agent.py").write_text(textwrap.dedent(REFUNDS_PY))
    (folder / "rules.yaml").write_text(REFUNDS_RULES)
    out = ok(lw(tmp_path, "run", "refunds", "refund it"), 3)
    pending = re.search(r"approvals approve (\S+) --project refunds\n", out.stderr)
    assert pending and (folder / ".loopwright" / "loopwright.db").is_file()
    done = ok(lw(tmp_path, "approvals", "approve", pending.group(1), "--project", "refunds"))
    assert done.stdout == "Done: refunded 5.0 on A-1\n"


def test_a_bare_agent_py_gets_the_rules_yaml_beside_it(tmp_path):
    """`loopwright run FOLDER` and `loopwright run FOLDER/agent.py` apply the folder's
    rules.yaml to an agent.py that sets no `rules=`; one that sets other rules as well is a
    configuration error naming its line, never a rules file silently ignored."""
    folder = tmp_path / "refunds"
    folder.mkdir()
    (folder / "agent.py").write_text(
        REFUNDS_PY.replace('    rules=Path(__file__).with_name("rules.yaml"),\n', "")
    )
    (folder / "rules.yaml").write_text(REFUNDS_RULES.replace("decision: ask", "decision: deny"))
    for target in ("refunds", "refunds/agent.py"):
        out = ok(lw(tmp_path, "run", target, "refund it"), 4)  # 4: denied
        assert "refund denied · matched rule 'refunds-need-approval'" in out.stderr
        assert "refunded" not in out.stdout
    allow_all = 'rules=Rules.from_yaml("default_decision: allow")'
    own = REFUNDS_PY.replace('rules=Path(__file__).with_name("rules.yaml")', allow_all)
    (folder / "agent.py").write_text(own.replace("Agent, tool", "Agent, Rules, tool"))
    line = REFUNDS_PY.splitlines().index('    rules=Path(__file__).with_name("rules.yaml"),') + 1
    for target in ("refunds", "refunds/agent.py"):
        error = one_error(lw(tmp_path, "run", target, "refund it"), "sets `rules=`")
        assert f"refunds/agent.py:{line}: agent 'refunds' sets `rules=`" in error


def test_a_question_is_answered_at_the_terminal(tmp_path):
    """`ask_user` is live at a terminal: the question and its options are shown, a number picks
    an option, and the answer is the call's result in the stored session."""
    import os

    from test_cli import ENV, LOOPWRIGHT, shown, terminal

    folder = tmp_path / "agents" / "painter"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text("model: scripted:script.yaml\nbuiltins: [ask_user]\n")
    (folder / "script.yaml").write_text(
        "replies:\n"
        "  - tool_calls: [{name: ask_user, args: {question: Which colour?, options: [red, blue]}}]\n"
        "  - text: Painting it.\n"
    )
    with terminal() as (keyboard, tty):
        proc = subprocess.Popen(
            [LOOPWRIGHT, "run", "painter", "--project", str(tmp_path), "--new", "--session", "p1", "paint"],
            env=ENV, stdin=tty, stdout=subprocess.PIPE, stderr=tty, text=True,
        )  # fmt: skip
        os.write(keyboard, b"2\n")
        out, _ = proc.communicate(timeout=30)
        err = shown(keyboard)
    assert proc.returncode == 0, err
    assert out == "Painting it.\n"
    assert "Which colour?" in err and "  1. red" in err and "  2. blue" in err
    export = subprocess.run(
        [LOOPWRIGHT, "sessions", "export", "p1", "--project", str(tmp_path)],
        env=ENV, capture_output=True, text=True,
    )  # fmt: skip
    outputs = [
        json.loads(line)["event"]
        for line in export.stdout.splitlines()
        if json.loads(line)["event"]["type"] == "tool:output"
    ]
    assert [(o["tool"], o["content"]) for o in outputs] == [("ask_user", "blue")]
