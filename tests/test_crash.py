"""Killing real processes at named commits (RELIABILITY P2, P3): the log stays gapless, every
call gets exactly one result, no side effect runs twice, and the session resumes to a valid
conversation. A killed process holds a short lease (`LOOPWRIGHT_LEASE_SECONDS`): it has expired
by the time the next process claims the session, which takes it over."""

from __future__ import annotations

import asyncio
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
from loopwright.runtime.journal import CRASH_ENV, LEASE_ENV
from loopwright.state.replay import continued, fold
from loopwright.store import SessionKey, StoredEvent, open_log
from loopwright.store.log import SessionRecord
from loopwright.testing import check_events

WORKER = Path(__file__).parent / "workers" / "ledger_agent.py"
KEY = SessionKey("default", "ledger", "s")
SHORT_LEASE = "0.001"
"""The lease of a process that will be killed: expired before another one can claim."""


def work(tmp: Path, *args: str, crash: str | None = None, in_tool: str | None = None):
    env = {**os.environ, "LEDGER": str(tmp / "ledger.txt")}
    for name in (CRASH_ENV, LEASE_ENV, "CRASH_IN_TOOL"):
        env.pop(name, None)
    if crash:
        env[CRASH_ENV] = crash
    if in_tool:
        env["CRASH_IN_TOOL"] = in_tool
    if crash or in_tool:
        env[LEASE_ENV] = SHORT_LEASE
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


def read_log(tmp: Path, key: SessionKey = KEY) -> tuple[list[StoredEvent], SessionRecord]:
    """The session's log and record, as a fresh process reads them."""

    async def read() -> tuple[list[StoredEvent], SessionRecord]:
        log = await open_log(tmp / "db.sqlite")
        try:
            return await log.read(key), await log.session(key)
        finally:
            await log.close()

    return asyncio.run(read())


def check_log(tmp: Path) -> None:
    stored, record = read_log(tmp)
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

    state = continued(fold((e.event for e in stored), {}), died=False)
    assert_history_valid(state.history.messages)
    assert record.status == "idle"


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
        kinds = [e.event.type for e in read_log(tmp_path)[0]]
        interrupted_runs = kinds.count("run:interrupted")
    counts = ledger(tmp_path)
    assert counts, "the tools really ran"
    charges = {line: n for line, n in counts.items() if line.startswith("charge")}
    assert all(n == 1 for n in charges.values()), charges  # a side effect never runs twice
    assert any(n == 2 for line, n in counts.items() if line.startswith("fetch"))  # idempotent
    assert interrupted_runs == PASSES * (len(POINTS) - 1)  # every crash but the one after `done`


def test_a_result_the_log_cannot_take_ends_the_run_and_the_next_process_goes_on(tmp_path):
    """The fault beside the kills (issue 14, item 1): a tool's result holds a lone surrogate (a
    name whose bytes are not UTF-8), which no encoder takes: it is made valid as the call's
    outcome. The model (in process, past every edge) then answers with the raw text, which the
    log cannot take: the run ends with `loop:error` and exits normally, the result kept in the
    log; the next process continues the session, and the tool ran once. Before: the run raised
    and the result was lost."""
    failed = work(tmp_path, "run", "garble 1")
    assert failed.returncode == 0, failed.stderr[-2000:]
    assert json.loads(failed.stdout)["stop"] == "error"
    after = work(tmp_path, "run", "continue 1")
    assert after.returncode == 0, after.stderr[-2000:]
    assert json.loads(after.stdout)["stop"] == "completed"
    check_log(tmp_path)
    stored = [e.event for e in read_log(tmp_path)[0]]
    assert [e.content for e in stored if isinstance(e, ev.ToolOutput)] == ["caf\ufffd 1"]
    assert [e.type for e in stored].count("loop:error") == 1
    assert ledger(tmp_path) == Counter({"label label-1": 1})
