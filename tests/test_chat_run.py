"""`run` beside `chat` (issue 34): an unknown `--session` is an error unless `--new` starts it,
and a prompt nobody could see (stdin a terminal, stderr not) is an error at once (exit 6), the
run paused with its item open, instead of a silent wait."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_chat import AGENT_PY, ENV, RULES, lw
from test_cli import LOOPWRIGHT, terminal


def make_project(root: Path) -> Path:
    (root / "agents" / "refunds").mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    (root / "agents" / "refunds" / "agent.py").write_text(AGENT_PY)
    (root / "agents" / "refunds" / "rules.yaml").write_text(RULES)
    return root


def test_an_unknown_session_is_an_error_unless_new_starts_it(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    typo = lw(project, "run", "refunds", "--session", "s-1", "hello")
    assert (typo.returncode, typo.stdout) == (2, "")
    assert typo.stderr == (
        "loopwright: error: no session 's-1' of agent 'refunds'\n"
        "hint: `loopwright sessions` lists them; --new starts one under this id\n"
    )
    assert lw(project, "sessions", "--json").stdout == ""  # nothing was started
    started = lw(project, "run", "refunds", "--new", "--session", "s-1", "hello")
    assert (started.returncode, started.stdout) == (0, "heard: hello\n"), started.stderr
    again = lw(project, "run", "refunds", "--new", "--session", "s-1", "hello")
    assert again.returncode == 2
    assert again.stderr.startswith("loopwright: error: session 's-1' of agent 'refunds' exists")
    went_on = lw(project, "run", "refunds", "--session", "s-1", "and on")
    assert (went_on.returncode, went_on.stdout) == (0, "heard: hello | and on\n")


def test_a_prompt_nobody_can_see_is_an_error_at_once(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    with terminal() as (_, tty):  # stdin is a terminal; stderr goes to a file
        ran = subprocess.run(
            [LOOPWRIGHT, "run", "refunds", "--new", "--session", "s-2", "refund please"],
            cwd=project, env=ENV, stdin=tty, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (6, ""), ran.stderr
    assert "[a]pprove" not in ran.stderr  # nobody was asked
    assert ran.stderr.endswith(
        "loopwright: error: the run needs you at a prompt, but stderr is not a terminal: the "
        "prompt cannot be shown (the run is paused, its items open)\n"
        "hint: run with stderr on the terminal, pass --yes to approve every call, or resolve as "
        "above\n"
    )
    waiting = [json.loads(line) for line in lw(project, "approvals", "--json").stdout.splitlines()]
    assert [(w["tool"], w["status"]) for w in waiting] == [("refund", "open")]
    approved = lw(project, "approvals", "approve", waiting[0]["id"])
    assert approved.returncode == 0, approved.stderr
    assert "Done: refunded 5.0 on A-1" in approved.stdout + approved.stderr
