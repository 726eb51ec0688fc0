"""Killing real processes at named commits (RELIABILITY P2, P3): the log stays gapless, every
call gets exactly one result, no side effect runs twice, and the session resumes to a valid
conversation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import assert_history_valid
from long_run import examples
from loopwright import events as ev
from loopwright.store import open_store
from loopwright.store.durable import CRASH_ENV
from loopwright.store.rebuild import rebuild
from loopwright.testing import check_events

WORKER = Path(__file__).parent / "workers" / "ledger_agent.py"


def work(tmp: Path, *args: str, crash: str | None = None, in_tool: str | None = None):
    env = {**os.environ, "LEDGER": str(tmp / "ledger.txt")}
    env.pop(CRASH_ENV, None)
    if crash:
        env[CRASH_ENV] = crash
    if in_tool:
        env["CRASH_IN_TOOL"] = in_tool
    return subprocess.run(
        [sys.executable, str(WORKER), str(tmp / "db.sqlite"), "s", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ledger(tmp: Path) -> Counter[str]:
    path = tmp / "ledger.txt"
    return Counter(path.read_text().split("\n")[:-1]) if path.exists() else Counter()


def runs(stored) -> list[list[ev.Event]]:
    out: list[list[ev.Event]] = []
    for item in stored:
        if item.event.type == "session":
            out.append([])
        out[-1].append(item.event)
    return out


def check_log(tmp: Path) -> None:
    store = open_store(tmp / "db.sqlite")
    stored = store.load("s", "default")
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))  # gapless
    calls = [
        c.id
        for e in stored
        if isinstance(e.event, ev.MessageCompleted)
        for c in e.event.message.tool_calls
    ]
    results = Counter(e.event.id for e in stored if isinstance(e.event, ev.ToolResult))
    assert results == Counter(calls), "every call has exactly one result"
    started = {e.event.id for e in stored if isinstance(e.event, ev.ToolStarted)}
    assert started <= set(results)
    last = runs(stored)[-1]
    check_events(last)  # the run after the crash is complete and well-formed

    history = rebuild(stored, {}, {}, died=False)
    assert_history_valid(history.messages)
    assert store.session("s", "default").status == "idle"
    store.close()


POINTS = [
    ("input:received", None),
    ("message:completed", None),
    ("tool:started", None),
    ("tool:started#2", None),
    ("tool:result", None),
    ("tool:result#2", None),
    ("done", None),
    (None, "charge"),
    (None, "fetch"),
]
PASSES = examples(quick=1, long=3)  # each pass crashes once at every point, on a longer log


@pytest.mark.long
def test_killed_at_every_crash_point_the_log_and_the_ledger_stay_right(tmp_path):
    interrupted_runs = 0
    for k, (point, in_tool) in enumerate(POINTS * PASSES):
        crashed = work(tmp_path, "run", f"cycle {k}", crash=point, in_tool=in_tool)
        assert crashed.returncode in (86, 87), (point, in_tool, crashed.stderr[-2000:])
        after = work(tmp_path, "run", f"continue {k}")
        assert after.returncode == 0, after.stderr[-2000:]
        assert json.loads(after.stdout)["stop"] == "completed"
        check_log(tmp_path)
        store = open_store(tmp_path / "db.sqlite")
        kinds = [e.event.type for e in store.load("s", "default")]
        interrupted_runs = kinds.count("run:interrupted")
        store.close()
    counts = ledger(tmp_path)
    assert counts, "the tools really ran"
    charges = {line: n for line, n in counts.items() if line.startswith("charge")}
    assert all(n == 1 for n in charges.values()), charges  # a side effect never runs twice
    assert any(n == 2 for line, n in counts.items() if line.startswith("fetch"))  # idempotent
    assert interrupted_runs == PASSES * (len(POINTS) - 1)  # every crash but the one after `done`
