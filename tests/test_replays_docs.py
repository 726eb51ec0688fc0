"""docs/replay.md runs as written, offline, in a copy of the examples project: the worked
example's commands (run, export, replay unchanged, replay against a changed rule: exit 1 and
the report it shows) and its Python block."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from test_readme import ENV, ROOT, after, block, python

DOC = ROOT / "docs" / "replay.md"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".loopwright")
    )
    return tmp_path


def bash(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", code], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300
    )


def test_the_worked_example_runs_as_shown(clone: Path) -> None:
    first = block(DOC, "sh", "loopwright sessions export mug-refund")
    ran = bash("set -e\n" + first.code, clone)
    assert ran.returncode == 0, ran.stderr
    unchanged = after(DOC, first).code
    assert ran.stdout.splitlines()[-2:] == unchanged.splitlines() * 2
    second = block(DOC, "sh", "cp -r examples shop")
    ran = bash(second.code, clone / "examples")
    assert (ran.returncode, ran.stderr) == (1, "")
    assert ran.stdout == after(DOC, second).code


def test_the_python_example_prints_what_it_shows(clone: Path) -> None:
    code = block(DOC, "python", "support-refund.jsonl").code
    ran = python(code, clone)
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout == after(DOC, block(DOC, "python", "support-refund.jsonl")).code


def test_the_hand_written_test_is_the_examples_own() -> None:
    shown = block(DOC, "python", "def test_session_replays_unchanged").code
    assert shown in (ROOT / "examples" / "test_sessions.py").read_text()
