"""Two terminals, one pending item (issue 12): terminal A runs `loopwright run` and waits at its
approval prompt; terminal B decides the same item with `loopwright approvals`. Exactly one
decision wins and it is the one that ran: B's, and A's prompt closes saying what was decided and
by whom — or A's, when A answers first, and B is told it was already resolved and changes
nothing. Both are real pseudo-terminals (stdin, stdout and stderr), read line by line: every step
waits for what a terminal printed, never for time to pass."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from loopwright.store.sqlite_log import SQLiteLog
from test_cli import LOOPWRIGHT

ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
SAFETY = 60
"""Seconds after which a wait fails the test instead of hanging it (none waits that long)."""
PROMPT = "[a]pprove / [d]eny / [e]dit arguments? "
ENDED = {
    "approve": "Done: refunded 5.0 on A-1",
    "deny": "Stopped: denied refund. Send another message to continue.",
}

AGENT_PY = '''\
from pathlib import Path

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply

LEDGER = Path(__file__).with_name("ledger.txt")


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order (each refund is a line of the ledger).

    Args:
        order: The order's id.
        amount: How much to refund.
    """
    with LEDGER.open("a") as ledger:
        ledger.write(f"{order} {amount}\\n")
    return f"refunded {amount} on {order}"


def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return Reply(text=f"Done: {request.messages[-1].content}")
    call = ToolCall(id="r1", name="refund", args={"order": "A-1", "amount": 5})
    return Reply(text="Refunding.", tool_calls=(call,))


agent = Agent(
    name="refunds",
    model=FunctionModel(reply),
    tools=[refund],
    rules=Path(__file__).with_name("rules.yaml"),
)
'''
RULES = "default_decision: ask\nrules:\n  - {name: refunds-need-approval, tool: refund, decision: ask}\n"


class Terminal:
    """A `loopwright` command at a pseudo-terminal of its own, run as `user`."""

    def __init__(self, cwd: Path, *args: str, user: str, env: dict[str, str] | None = None) -> None:
        self.master, tty = os.openpty()
        self.process = subprocess.Popen(
            [LOOPWRIGHT, *args],
            cwd=cwd,
            env=ENV | {"USER": user, "LOGNAME": user} | (env or {}),
            stdin=tty,
            stdout=tty,
            stderr=tty,
        )
        os.close(tty)  # the command holds the only other end: its exit ends the output
        self.seen = ""
        self.ended = False

    def read_until(self, text: str) -> str:
        """What the terminal printed up to and including `text`, waiting for it."""
        deadline = time.monotonic() + SAFETY
        while text not in self.seen:
            if self.ended:
                raise AssertionError(f"{text!r} never came; the terminal showed:\n{self.seen}")
            if not select.select([self.master], [], [], max(0, deadline - time.monotonic()))[0]:
                raise AssertionError(f"no {text!r} within {SAFETY}s; so far:\n{self.seen}")
            self._read()
        return self.seen[: self.seen.index(text) + len(text)]

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> tuple[int, str]:
        """The exit status and everything the terminal showed."""
        while not self.ended:
            if not select.select([self.master], [], [], SAFETY)[0]:
                self.process.kill()
                raise AssertionError(f"the command did not end; so far:\n{self.seen}")
            self._read()
        code = self.process.wait(timeout=SAFETY)
        os.close(self.master)
        return code, self.seen

    def _read(self) -> None:
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the command ended and closed its end
            chunk = b""
        self.ended = not chunk
        self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "agents" / "refunds").mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    (root / "agents" / "refunds" / "agent.py").write_text(AGENT_PY)
    (root / "agents" / "refunds" / "rules.yaml").write_text(RULES)
    return root


def loopwright(project: Path, *args: str) -> str:
    out = subprocess.run(
        [LOOPWRIGHT, *args],
        cwd=project,
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def at_the_prompt(project: Path) -> tuple[Terminal, dict[str, Any]]:
    """Terminal A (alice) runs the agent and waits at its prompt; the item it asks about."""
    a = Terminal(project, "run", "refunds", "refund A-1", user="alice")
    shown = a.read_until(PROMPT)
    assert "? refund needs your approval · matched rule 'refunds-need-approval'" in shown
    [item] = [json.loads(line) for line in loopwright(project, "approvals", "--json").splitlines()]
    assert (item["tool"], item["args"], item["status"]) == ("refund", {"order": "A-1", "amount": 5}, "open")  # fmt: skip
    return a, item


def ledger(project: Path) -> list[str]:
    path = project / "agents" / "refunds" / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def logged(project: Path, session_id: str) -> list[dict[str, Any]]:
    out = loopwright(project, "sessions", "export", session_id)
    return [json.loads(line)["event"] for line in out.splitlines()]


def decisions(events: list[dict[str, Any]], pending_id: str) -> list[tuple[str, str, str]]:
    """Every record of a decision on the item: the authority's, and the run's."""
    return [
        (e["type"], e.get("status") or e["decision"], e["by"])
        for e in events
        if e["type"] in ("pending:decided", "approval:resolved") and e["id"] == pending_id
    ]


@pytest.mark.parametrize(
    ("action", "status", "decision", "exit_a"),
    [("deny", "denied", "deny", 4), ("approve", "approved", "approve", 0)],
)
def test_a_decision_from_another_terminal_wins_over_the_waiting_prompt(
    project, action, status, decision, exit_a
):
    a, item = at_the_prompt(project)
    pid, session = item["id"], item["session_id"]

    b = Terminal(project, "approvals", action, pid, user="bob")
    code_b, shown_b = b.finish()
    assert code_b == exit_a, shown_b  # (the status of the run it decided, as A's)
    assert shown_b == (
        f"{pid}: {status} (approval: refund) by bob\n"
        f"the run of session {session} goes on in another process (the terminal or server "
        "that holds it) with this decision\n"
        f"it ended {'denied' if action == 'deny' else 'completed'}: {ENDED[action]}\n"
    )

    # A's prompt closes, saying what was decided and by whom; the run goes on with it
    assert a.read_until("(decided elsewhere)\n").endswith(
        f"{PROMPT}\n  refund: {status} by bob (decided elsewhere)\n"
    )
    code_a, shown_a = a.finish()
    assert code_a == exit_a, shown_a
    assert shown_a.count(PROMPT) == 1
    events = logged(project, session)
    assert decisions(events, pid) == [
        ("pending:decided", status, "bob"),
        ("approval:resolved", decision, "bob"),
    ]
    refunds = [e for e in events if e["type"] == "tool:started" and e["tool"] == "refund"]
    if action == "deny":
        assert ledger(project) == [] and refunds == []  # the refund did not run
        assert "✗ stopped: refund denied" in shown_a
    else:
        assert ledger(project) == ["A-1 5.0"] and len(refunds) == 1
        assert shown_a.endswith("Done: refunded 5.0 on A-1\n")
    assert events[-1] == {"type": "done", "text": events[-1]["text"], "stopReason": events[-1]["stopReason"]}  # fmt: skip
    assert events[-1]["stopReason"] == ("denied" if action == "deny" else "completed")
    assert loopwright(project, "approvals", "--json") == ""


def test_an_answer_at_the_prompt_wins_and_the_other_terminal_changes_nothing(project):
    a, item = at_the_prompt(project)
    pid, session = item["id"], item["session_id"]
    a.type("a\n")
    code_a, shown_a = a.finish()
    assert code_a == 0, shown_a
    assert shown_a.endswith("Done: refunded 5.0 on A-1\n")
    assert "decided elsewhere" not in shown_a
    before = logged(project, session)

    b = Terminal(project, "approvals", "deny", pid, user="bob")
    code_b, shown_b = b.finish()
    assert (code_b, shown_b) == (
        0,
        f"{pid}: already resolved (approved by alice); nothing changed\n",
    )
    assert logged(project, session) == before  # nothing changed
    assert decisions(before, pid) == [
        ("pending:decided", "approved", "alice"),
        ("approval:resolved", "approve", "alice"),
    ]
    assert ledger(project) == ["A-1 5.0"]


def test_ctrl_c_at_the_prompt_closes_the_item(project):
    """Cancelled at its prompt, the run ends and its item is closed: never listed open but
    impossible to resume; deciding it afterwards says it was closed, and runs nothing."""
    a, item = at_the_prompt(project)
    a.process.send_signal(signal.SIGINT)
    code_a, shown_a = a.finish()
    assert code_a == 130, shown_a
    assert f"{PROMPT}\n" in shown_a and "✗ cancelled" in shown_a
    assert loopwright(project, "approvals", "--json") == ""
    b = Terminal(project, "approvals", "approve", item["id"], user="bob")
    assert b.finish() == (
        0,
        f"{item['id']}: already resolved (skipped by loopwright); nothing changed\n",
    )
    events = logged(project, item["session_id"])
    assert decisions(events, item["id"]) == [("pending:decided", "skipped", "loopwright")]
    assert ledger(project) == []


def test_a_run_killed_after_asking_leaves_its_item_open_and_resumable(project):
    """Killed right after its item was recorded (before it paused), with its lease already
    expired: the next command that lists or decides logs the pause the dead run did not reach
    (P4: the item is durable state, not the dead process's memory); approving it from another
    terminal resumes the session, and the refund runs once."""
    crash = ENV | {"LOOPWRIGHT_CRASH_AFTER": "pending:requested", "LOOPWRIGHT_LEASE_SECONDS": "0"}
    killed = subprocess.run(
        [LOOPWRIGHT, "run", "refunds", "refund A-1"],
        cwd=project, env=crash, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=SAFETY,
    )  # fmt: skip
    assert killed.returncode == 86, killed.stderr
    [session] = [
        json.loads(line) for line in loopwright(project, "sessions", "--json").splitlines()
    ]
    assert session["status"] == "interrupted"  # its lease expired before its `done`
    [pending] = [e for e in logged(project, session["id"]) if e["type"] == "approval:pending"]
    [item] = [json.loads(line) for line in loopwright(project, "approvals", "--json").splitlines()]
    assert (item["id"], item["status"]) == (pending["id"], "open")
    kinds = [e["type"] for e in logged(project, session["id"])]
    assert kinds[kinds.index("pending:requested") :] == [
        "pending:requested", "actauth:decision", "step:finished", "loop:paused", "done"
    ]  # fmt: skip
    b = Terminal(project, "approvals", "approve", pending["id"], user="bob")
    code_b, shown_b = b.finish()
    assert code_b == 0, shown_b
    assert shown_b.startswith(f"{pending['id']}: approved (approval: refund) by bob\n"), shown_b
    assert shown_b.endswith("Done: refunded 5.0 on A-1\n"), shown_b
    assert ledger(project) == ["A-1 5.0"]
    events = logged(project, session["id"])
    assert events[-1] == {"type": "done", "text": "Done: refunded 5.0 on A-1", "stopReason": "completed"}  # fmt: skip


def test_an_approval_after_the_run_at_the_prompt_was_killed_resumes_it(project):
    """Issue 30, window 2: `kill -9` the run waiting at its prompt, then approve from another
    terminal within its lease. The decision is recorded; the command waits for the run that
    was to go on, sees its process died once its lease expired, takes the session over and
    resumes it: the refund runs once, and the command says how the run ended (not "goes on in
    another process", with the session left interrupted and the approved call never run)."""
    lease = {"LOOPWRIGHT_LEASE_SECONDS": "6"}  # (B decides well within it)
    a = Terminal(project, "run", "refunds", "refund A-1", user="alice", env=lease)
    a.read_until(PROMPT)
    item = asyncio.run(open_item(project))
    a.process.send_signal(signal.SIGKILL)
    assert a.finish()[0] == -signal.SIGKILL
    b = Terminal(project, "approvals", "approve", item["id"], user="bob", env=lease)
    code_b, shown_b = b.finish()
    assert (code_b, shown_b) == (
        0,
        f"{item['id']}: approved (approval: refund) by bob\n"
        f"the run of session {item['session_id']} goes on in another process (the terminal or "
        "server that holds it) with this decision\n"
        "it ended completed: Done: refunded 5.0 on A-1\n",
    )
    assert ledger(project) == ["A-1 5.0"]
    events = logged(project, item["session_id"])
    assert decisions(events, item["id"]) == [
        ("pending:decided", "approved", "bob"),
        ("approval:resolved", "approve", "bob"),
    ]
    kinds = [e["type"] for e in events]
    assert "run:interrupted" not in kinds
    assert kinds[kinds.index("pending:requested") :][:4] == [
        "pending:requested", "pending:decided", "actauth:decision", "step:finished"
    ]  # fmt: skip
    assert events[-1] == {"type": "done", "text": "Done: refunded 5.0 on A-1", "stopReason": "completed"}  # fmt: skip
    [session] = [
        json.loads(line) for line in loopwright(project, "sessions", "--json").splitlines()
    ]
    assert session["status"] == "idle"


async def open_item(project: Path) -> dict[str, str]:
    """The project's one open item, read from its log here (no process to start)."""
    log = SQLiteLog(project / ".loopwright" / "loopwright.db")
    try:
        [item] = (await log.pending("default", status="open")).items
    finally:
        await log.close()
    return {"id": item.id, "session_id": item.session_id}
