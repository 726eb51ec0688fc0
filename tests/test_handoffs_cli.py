"""A handoff at the CLI: `loopwright run` (a real subprocess, on the project of
test_handoffs_http.py) prints "→ handed off to billing" among its progress and billing's answer
on stdout; the session's next message (`--session`) is billing's, with no second handoff; and
`loopwright sessions show` prints the handoff and names the active agent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from live_server import write
from test_handoffs_http import BILLING, TRIAGE

LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
SRC = str(Path(__file__).resolve().parents[1] / "src")


def run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"}
    env |= {"NO_COLOR": "1", "PYTHONPATH": SRC, "LOOPWRIGHT_HOME": str(project / "home")}
    return subprocess.run(
        [LOOPWRIGHT, "run", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def show(project: Path, session: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"}
    env |= {"NO_COLOR": "1", "PYTHONPATH": SRC, "LOOPWRIGHT_HOME": str(project / "home")}
    return subprocess.run(
        [LOOPWRIGHT, "sessions", "show", session, "--project", str(project)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_loopwright_run_prints_the_handoff(tmp_path: Path) -> None:
    (tmp_path / "loopwright.toml").write_text("")
    write(tmp_path / "agents" / "triage", TRIAGE)
    write(tmp_path / "agents" / "billing", BILLING)
    first = run(tmp_path, "--session", "s1", "--new", "triage", "refund please")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Billing here.\n"
    progress = first.stderr.splitlines()
    assert "→ handed off to billing" in progress, first.stderr
    transfer = next(i for i, line in enumerate(progress) if "transfer_to_billing" in line)
    assert transfer < progress.index("→ handed off to billing")
    again = run(tmp_path, "--session", "s1", "triage", "thanks")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Still billing.\n"
    assert "handed off" not in again.stderr
    shown = show(tmp_path, "s1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("session s1 · agent triage · ")
    assert lines[1:10] == [
        "user: refund please",
        "  → transfer_to_billing {}",
        "  ← transfer_to_billing Transferred to billing.",
        "  → handed off to billing",
        "assistant: Billing here.",
        "-- run completed",
        "user: thanks",
        "assistant: Still billing.",
        "-- run completed",
    ], lines
    assert "active agent: billing (handed off; the session's first is triage)" in lines
