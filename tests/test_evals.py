"""`loopwright eval` from the command line, in a subprocess, on a copy of the examples project
whose store is a real SQLite file or a real PostgreSQL database: the exact table, the JSON
results, the progress lines, the stored sessions and the exit status; `eval add` from a stored
session passes, then fails once the agent changes; bad datasets are usage errors naming the
file and the key; and docs/evals.md's commands print what the page shows."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from live_server import LiveServer
from loopwright.project import load_project
from loopwright.runtime import Runtime
from loopwright.server import create_app
from loopwright.store.opening import open_log
from test_examples import LOOPWRIGHT, copy_examples

ROOT = Path(__file__).resolve().parents[1]
MESSAGE = "Hi, my order A-1001 arrived damaged. Can I get a refund?"
ANSWER = (
    "Done! Your refund of $24.99 for order A-1001 has been issued (refund RF-1001). It should "
    "reach your original payment method within 3–5 business days. Is there anything else I can "
    "help you with?"
)
WRONG = {  # a case of the support agent that fails every check it makes
    "input": MESSAGE,
    "approve": "all",
    "expect": {
        "called": [{"tool": "issue_refund", "args": {"amount": 20}}],
        "not_called": ["issue_refund"],
        "decisions": {"lookup_order": "deny"},
        "answer_contains": ["RF-9999"],
    },
}
TIMED = {"text:delta", "tool:delta", "message:partial"}
"""Left out of the compared logs: how many there are depends on the script's typing delays
(a reply streamed past `partial_every` is also stored partially)."""
REFUND_EVENTS = [  # what the refund-damaged case's session holds (deltas left out)
    *("session", "input:received", "step:started", "budget:check", "message:completed"),
    *("assistant:text", "actauth:decision", "tool:started", "toollane:result", "tool:output"),
    *("tool:result", "step:finished", "step:started", "budget:check", "message:completed"),
    *("assistant:text", "approval:pending", "pending:requested", "pending:decided"),
    *("approval:resolved", "actauth:decision", "tool:started", "toollane:result"),
    *("tool:output", "tool:result", "step:finished", "step:started", "budget:check"),
    *("message:completed", "step:finished", "loop:done", "done"),
]


def local_env() -> dict[str, str]:
    """This environment, with the project's own store (no store or home from outside)."""
    leave_out = ("LOOPWRIGHT_HOME", "LOOPWRIGHT_STORE_URL")
    return {k: v for k, v in os.environ.items() if k not in leave_out} | {"NO_COLOR": "1"}


@pytest.fixture(params=["sqlite", "postgres"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A copy of examples/, the environment its commands run in, and where its store is."""
    root = copy_examples(tmp_path)
    env = local_env()
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        env["LOOPWRIGHT_STORE_URL"] = url
        return root, env, url
    return root, env, str(root / ".loopwright" / "loopwright.db")


def loopwright(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOOPWRIGHT, *args],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


def stored(store: str, tenant: str = "default") -> dict[str, list[Any]]:
    """Every session of the store's tenant: its id → its events (`TIMED` left out)."""

    async def read() -> dict[str, list[Any]]:
        log = await open_log(store)
        try:
            runtime = Runtime({}, log)
            page = await runtime.sessions(tenant, limit=100)
            found = {}
            for record in page.items:
                events = [s.event for s in await runtime.read(record.key)]
                found[record.key.id] = [e for e in events if e.type not in TIMED]
            return found
        finally:
            await log.close()

    return asyncio.run(read())


def test_a_dataset_runs_from_the_command_line(
    project: tuple[Path, dict[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env, store = project
    (root / "evals" / "support" / "refund-wrong.yaml").write_text(yaml.safe_dump(WRONG))
    out = loopwright(root, env, "eval", "evals/support", "--run", "t1", "--concurrency", "2")
    assert out.returncode == 1, out.stderr
    assert out.stdout == (
        "case            result  checks  stop       session\n"
        "order-status    pass    4/4     completed  eval-t1-order-status\n"
        "refund-damaged  pass    7/7     completed  eval-t1-refund-damaged\n"
        "refund-denied   pass    5/5     denied     eval-t1-refund-denied\n"
        "refund-wrong    FAIL    0/4     completed  eval-t1-refund-wrong\n"
        "\n"
        "refund-wrong:\n"
        '  FAIL called issue_refund {"amount": 20}: called, but with other arguments: '
        '{"amount": 24.99, "order_id": "A-1001", "reason": "Item arrived damaged"}\n'
        "  FAIL not called issue_refund: called 1 time(s)\n"
        "  FAIL decision lookup_order deny: decided: allow\n"
        "  FAIL answer contains 'RF-9999': the answer does not: "
        f"{ANSWER[:119] + '…'!r}\n"
        "\n"
        "3 passed, 1 failed (run t1)\n"
    )
    progress = out.stderr.splitlines()
    assert [p.split("] ", 1)[0] for p in progress[:4]] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    assert sorted(p.split("] ", 1)[1] for p in progress[:4]) == [
        "order-status: pass",
        "refund-damaged: pass",
        "refund-denied: pass",
        "refund-wrong: FAIL",
    ]
    assert progress[4:] == ["results: .loopwright/evals/eval-t1.json"]
    results = json.loads((root / ".loopwright" / "evals" / "eval-t1.json").read_text())
    assert {k: v for k, v in results.items() if k != "cases"} == {
        "run": "t1",
        "dataset": "evals/support",
        "tenant": "default",
        "passed": 3,
        "failed": 1,
    }
    by_case = {c["case"]: c for c in results["cases"]}
    assert list(by_case) == ["order-status", "refund-damaged", "refund-denied", "refund-wrong"]
    assert by_case["refund-damaged"] == {
        "case": "refund-damaged",
        "passed": True,
        "agent": "support",
        "session_id": "eval-t1-refund-damaged",
        "stop_reason": "completed",
        "answer": ANSWER,
        "checks": [
            {
                "check": 'called lookup_order {"order_id": "A-1001"}',
                "passed": True,
                "reason": 'called with {"order_id": "A-1001"}',
            },
            {
                "check": 'called issue_refund {"amount": 24.99, "order_id": "A-1001"}',
                "passed": True,
                "reason": 'called with {"amount": 24.99, "order_id": "A-1001", '
                '"reason": "Item arrived damaged"}',
            },
            {"check": "decision lookup_order allow", "passed": True, "reason": "decided: allow"},
            {"check": "decision issue_refund ask", "passed": True, "reason": "decided: ask"},
            {"check": "stop_reason completed", "passed": True, "reason": "stopped: completed"},
            {
                "check": "answer contains 'RF-1001'",
                "passed": True,
                "reason": f"the answer holds it: {ANSWER[:119] + '…'!r}",
            },
            {
                "check": "judge scripted:scripts/judge-pass.yaml",
                "passed": True,
                "reason": "the refund of $24.99 is confirmed with its id, in a friendly tone.",
            },
        ],
        "error": None,
    }
    assert by_case["refund-denied"]["stop_reason"] == "denied"
    assert [c["passed"] for c in by_case["refund-wrong"]["checks"]] == [False] * 4
    sessions = stored(store)
    assert sorted(sessions) == [
        "eval-t1-order-status",
        "eval-t1-refund-damaged",
        "eval-t1-refund-denied",
        "eval-t1-refund-wrong",
    ]
    refund = sessions["eval-t1-refund-damaged"]
    assert [e.type for e in refund] == REFUND_EVENTS
    decided = [e for e in refund if e.type == "pending:decided"]
    assert [(e.status, e.by) for e in decided] == [("approved", "eval")]
    denied = [e for e in sessions["eval-t1-refund-denied"] if e.type == "pending:decided"]
    assert [(e.status, e.by) for e in denied] == [("denied", "eval")]
    assert refund[-1].text == ANSWER

    if "LOOPWRIGHT_STORE_URL" in env:  # (the server reads the store the command wrote)
        monkeypatch.setenv("LOOPWRIGHT_STORE_URL", env["LOOPWRIGHT_STORE_URL"])
    with LiveServer(create_app(load_project(root))) as server, server.client() as http:
        listed = http.get("/agents/support/sessions").json()
        shown = http.get("/agents/support/sessions/eval-t1-refund-damaged").json()
        logged = http.get("/agents/support/sessions/eval-t1-refund-damaged/events").json()
    assert sorted((s["id"], s["status"]) for s in listed["sessions"]) == [
        (case, "idle") for case in sorted(sessions)
    ]
    assert (shown["status"], shown["pending"], shown["history"][-1]["parts"][0]["text"]) == (
        "idle",
        [],
        ANSWER,
    )
    types = [e["event"]["type"] for e in logged["events"]]
    assert [t for t in types if t not in TIMED] == REFUND_EVENTS
    again = loopwright(root, env, "eval", "evals/support", "--run", "t1")
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr.startswith("loopwright: error: evals/support/order-status.yaml: run 't1'")


def test_eval_add_makes_a_case_that_passes_until_the_agent_changes(
    project: tuple[Path, dict[str, str], str],
) -> None:
    root, env, _ = project
    ran = loopwright(root, env, "run", "support", "--yes", "--new", "--session", "mug-1", MESSAGE)
    assert (ran.returncode, ran.stdout) == (0, ANSWER + "\n")
    added = loopwright(root, env, "eval", "add", "mug-1", "--to", "evals/mine", "--name", "mug")
    assert (added.returncode, added.stdout) == (0, "")
    assert added.stderr == "wrote evals/mine/mug.yaml (run it: loopwright eval evals/mine)\n"
    case = yaml.safe_load((root / "evals" / "mine" / "mug.yaml").read_text())
    refund = {"order_id": "A-1001", "amount": 24.99, "reason": "Item arrived damaged"}
    assert [r.get("tool_calls") for r in case["script"]] == [
        [{"name": "lookup_order", "args": {"order_id": "A-1001"}, "id": "call_1"}],
        [{"name": "issue_refund", "args": refund, "id": "call_2"}],
        None,
    ]
    assert {k: v for k, v in case.items() if k != "script"} == {
        "input": MESSAGE,
        "agent": "support",
        "approve": {"issue_refund": "approve"},
        "expect": {
            "called": [
                {"tool": "lookup_order", "args": {"order_id": "A-1001"}},
                {"tool": "issue_refund", "args": refund},
            ],
            "decisions": {"lookup_order": "allow", "issue_refund": "ask"},
            "stop_reason": "completed",
            "answer_contains": [ANSWER],
        },
    }
    passed = loopwright(root, env, "eval", "evals/mine", "--run", "a1")
    assert (passed.returncode, passed.stdout.splitlines()[1]) == (
        0,
        "mug   pass    6/6     completed  eval-a1-mug",
    )
    rules = root / "agents" / "support" / "rules.yaml"
    rules.write_text(rules.read_text().replace("decision: ask", "decision: allow"))
    failed = loopwright(root, env, "eval", "evals/mine", "--run", "a2")
    assert failed.returncode == 1
    assert failed.stdout == (
        "case  result  checks  stop       session\n"
        "mug   FAIL    5/6     completed  eval-a2-mug\n"
        "\n"
        "mug:\n"
        "  FAIL decision issue_refund ask: decided: allow\n"
        "\n"
        "0 passed, 1 failed (run a2)\n"
    )
    again = loopwright(root, env, "eval", "add", "mug-1", "--to", "evals/mine", "--name", "mug")
    assert (again.returncode, again.stderr) == (
        2,
        "loopwright: error: evals/mine/mug.yaml exists already\nhint: choose another --name\n",
    )
    unknown = loopwright(root, env, "eval", "add", "nobody")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("loopwright: error: no session 'nobody'\n")


BAD = [
    (
        {"inptu": "hi"},
        "evals/bad/case.yaml: unknown keys ['inptu'] (known: ['agent', 'answers', "
        "'approve', 'expect', 'files', 'input', 'model', 'script'])",
    ),
    (
        {"input": "hi", "expect": {"stop_reason": "done"}},
        "evals/bad/case.yaml: "
        "expect.stop_reason: 'done' is not one of ['completed', 'max_tokens', 'terminated', "
        "'error', 'paused', 'denied', 'max_turns', 'aborted']",
    ),
    (
        {"input": "hi", "model": "scripted:nowhere.yaml"},
        "evals/bad/case.yaml: model: no script at evals/bad/nowhere.yaml",
    ),
    (
        {"input": "hi", "agent": "ghost"},
        "evals/bad/case.yaml: agent: no agent named 'ghost' (agents: concierge, payments, support, writer)",
    ),
]


@pytest.mark.parametrize(("case", "error"), BAD)
def test_a_bad_dataset_is_a_usage_error_naming_the_file_and_key(
    tmp_path: Path, case: dict[str, Any], error: str
) -> None:
    root = copy_examples(tmp_path)
    (root / "evals" / "bad").mkdir()
    (root / "evals" / "bad" / "case.yaml").write_text(yaml.safe_dump(case))
    env = local_env()
    out = loopwright(root, env, "eval", "evals/bad")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (f"loopwright: error: {error}\nhint: docs/evals.md lists a case's keys\n")


def test_the_docs_commands_print_what_the_page_shows(tmp_path: Path) -> None:
    """Every `$ loopwright ...` line of docs/evals.md's console blocks, run in order in a copy
    of examples/, prints the lines the page shows under it (stdout)."""
    root = copy_examples(tmp_path)
    env = local_env()
    text = (ROOT / "docs" / "evals.md").read_text()
    consoles = re.findall(r"```console\n(.*?)```", text, re.S)
    steps: list[tuple[str, list[str]]] = []
    for console in consoles:
        for line in console.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    assert [s[0].split()[:3] for s in steps] == [
        ["loopwright", "eval", "evals/support"],
        ["loopwright", "run", "support"],
        ["loopwright", "eval", "add"],
        ["loopwright", "eval", "evals/mine"],
    ]
    for command, shown in steps:
        out = loopwright(root, env, *shlex.split(command)[1:])
        assert out.returncode == 0, (command, out.stderr)
        assert out.stdout.splitlines() == shown, command


def test_the_docs_python_block_runs(tmp_path: Path) -> None:
    root = copy_examples(tmp_path)
    env = local_env()
    [code] = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "evals.md").read_text(), re.S)
    (root.parent / "block.py").write_text(code)
    out = subprocess.run(
        [sys.executable, "block.py"],
        cwd=root.parent,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == (
        "case            result  checks  stop       session\n"
        "order-status    pass    4/4     completed  eval-py-order-status\n"
        "refund-damaged  pass    7/7     completed  eval-py-refund-damaged\n"
        "refund-denied   pass    5/5     denied     eval-py-refund-denied\n"
        "\n"
        "3 passed, 0 failed (run py)\n"
        "True ['eval-py-order-status', 'eval-py-refund-damaged', 'eval-py-refund-denied']\n"
    )


def test_at_a_terminal_the_progress_is_a_bar_redrawn_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from loopwright.cli.evals import Progress
    from loopwright.evals import CaseResult

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    progress = Progress(2)
    progress.done(CaseResult("one", "a", "eval-r-one", "completed", "", ()))
    progress.done(CaseResult("two", "a", "eval-r-two", None, "", (), error="boom"))
    assert screen.getvalue() == (
        f"\r[{'#' * 15}{'-' * 15}] 1/2 one: pass\x1b[K\r[{'#' * 30}] 2/2 two: FAIL\x1b[K\n"
    )
