"""docs/fork.md's worked example runs as written (its shell block through bash with the real
`loopwright` command, then its Python block) on a copy of the examples project, offline; and the
CLI forks a session stored in PostgreSQL: lineage in `sessions`, `sessions --json` and `sessions
show`, clear errors for a bad seq, an id in use and an unknown session."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from test_examples import copy_examples
from test_readme import ENV, ROOT, block

DOC = ROOT / "docs" / "fork.md"


def lines_of(code: str) -> list[str]:
    return [line for line in code.splitlines() if line.strip() and not line.startswith("#")]


def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    copy_examples(tmp_path)
    shell = block(DOC, "sh", "loopwright sessions fork order-1001")
    codes, outs = [], []
    for line in lines_of(shell.code):  # each line where the one before left off (`cd`)
        done = subprocess.run(
            ["bash", "-c", f"cd {'examples' if outs else '.'} && {line}"],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        codes.append(done.returncode)
        outs.append(done.stdout)
    assert codes == [0, 3, 0, 0, 4, 0, 0, 3, 0], outs
    assert outs[2].strip() == "order-1001-denied" and outs[6].strip() == "before-the-refund"
    table = outs[3].splitlines()
    assert table[0].split() == [
        *("ID", "AGENT", "STATUS", "UPDATED", "LAST", "SEQ", "FORKED", "FROM", "TITLE")
    ]
    cut = table[0].index("TITLE")  # (a title has spaces: the columns before it)
    assert [row[:cut].split()[:3] + row[:cut].split()[4:] for row in table[1:]] == [
        ["order-1001-denied", "support", "paused", "22", "order-1001@22"],
        ["order-1001", "support", "paused", "22"],
    ]
    shown = outs[8].splitlines()
    assert re.fullmatch(
        r"session before-the-refund · agent support · paused · 25 events · updated \S+ · "
        r"forked from order-1001@12 · title: .+",
        shown[0],
    )
    assert "user: Actually, could you send a replacement instead?" in shown
    db = tmp_path / "examples" / ".loopwright" / "loopwright.db"
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT s.name, s.status, s.last_seq, f.name, s.forked_at FROM sessions s "
            "LEFT JOIN sessions f ON f.id = s.forked_from ORDER BY s.id"
        ).fetchall()
        calls = con.execute(
            "SELECT s.name, count(*) FROM events e JOIN sessions s ON s.id = e.session "
            "WHERE e.type = 'tool:started' AND e.data LIKE '%issue_refund%' GROUP BY s.name"
        ).fetchall()
    assert rows == [
        ("order-1001", "idle", 36, None, None),
        ("order-1001-denied", "idle", 30, "order-1001", 22),
        ("before-the-refund", "paused", 25, "order-1001", 12),
    ]
    assert calls == [("order-1001", 1)]  # the refund was issued once: in the approved original
    python = block(DOC, "python", "from loopwright.runtime.forking import fork")
    script = tmp_path / "fork.py"
    script.write_text(python.code)
    ran = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=ENV, capture_output=True, text=True
    )
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout == "Lineage(session='order-1001', seq=12)\n"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`loopwright ARGS` in a folder, in this process: (exit status, stdout, stderr)."""
    from loopwright.cli.main import main

    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")

    def run(cwd: Path, *args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_the_cli_forks_a_session_stored_in_postgresql(tmp_path: Path, pg_url: str, cli) -> None:
    project = copy_examples(tmp_path)
    (project / "loopwright.toml").write_text(f'[store]\nurl = "{pg_url}"\n')
    said = "Hi, my order A-1001 arrived damaged. Can I get a refund?"
    started = cli(project, "run", "support", "--new", "--session", "s1", said)
    assert started[0] == 3  # paused: no terminal
    code, out, err = cli(project, "sessions", "fork", "s1", "--at", "12", "--as", "s1-early")
    assert (code, out) == (0, "s1-early\n"), err
    assert err == (
        "forked session s1 at seq 12 as s1-early (interrupted); "
        "see `loopwright sessions show s1-early`\n"
    )
    code, out, _ = cli(project, "sessions", "--json")
    listed = {row["id"]: row for row in map(json.loads, out.splitlines())}
    assert listed["s1-early"]["forked_from"] == {"session": "s1", "seq": 12}
    assert listed["s1"]["forked_from"] is None
    assert (listed["s1"]["last_seq"], listed["s1"]["status"]) == (22, "paused")
    code, out, _ = cli(project, "sessions", "fork", "s1", "--json")  # at its end, a fresh id
    made = json.loads(out)
    assert (made["status"], made["last_seq"], made["forked_from"]) == (
        "paused",
        22,
        {"session": "s1", "seq": 22},
    )
    code, out, _ = cli(project, "sessions", "show", "s1-early")
    assert re.fullmatch(
        r"session s1-early · agent support · interrupted · 12 events · updated \S+ · "
        r"forked from s1@12 · title: .+",
        out.splitlines()[0],
    )
    for args, error, hint in (
        (
            ("--at", "23"),
            "seq 23 is not in session 's1' (its events are 1..22)",
            "a seq from 1 to 22 (`loopwright sessions show s1`)",
        ),
        (
            ("--as", "s1"),
            "session id 's1' is in use",
            "choose another id with --as, or leave it out for a fresh one",
        ),
    ):
        code, out, err = cli(project, "sessions", "fork", "s1", *args)
        assert (code, out) == (2, "")
        assert err == f"loopwright: error: {error}\nhint: {hint}\n"
    code, _, err = cli(project, "sessions", "fork", "nope")
    assert code == 2 and err.startswith("loopwright: error: no session 'nope'\n")
    code, _, err = cli(project, "sessions", "fork", "s1", "--tenant", "globex")
    assert code == 2 and err.startswith("loopwright: error: no session 's1'\n")
