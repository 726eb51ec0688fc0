"""Issue 12's crash test: a run that asks for approvals is killed right after each of its commits
(`LOOPWRIGHT_CRASH_AFTER=type#n`), and a fresh process then finds every pending item either
resolvable — and, once resolved, the session resumes and the call runs exactly once, or is
denied — or closed and shown closed: never listed open but unresumable. No tool runs twice (the
tools append to a ledger file each time they really run).

The runs (tests/workers/pending_agent.py) ask with nobody to answer live (a durable pause,
resolved by another process that resumes it), with a live approver waiting (a held stream; the
decision is made by this test, elsewhere), with a live approver that answers at once, and with
the ask inside a subagent (paused, and held). A step of a run is one process; the crash may hit
any step. The default run crashes each scenario at two points; `pytest --long` at every commit
point, found by running the scenario once without a crash.

The checking process runs its log's clock an hour ahead: the killed process's lease has expired
for it, as it would have by then.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from long_run import examples
from loopwright import Approval
from loopwright import events as ev
from loopwright.gate.decide import MAY_HAVE_RUN
from loopwright.runtime import Runtime
from loopwright.runtime.journal import COMMIT_AT, CRASH_ENV, LEASE_ENV
from loopwright.store import SessionKey
from loopwright.store.sqlite_log import SQLiteLog
from workers.pending_agent import SESSION, TENANT, agents

WORKER = Path(__file__).parent / "workers" / "pending_agent.py"
ROOT = SessionKey(TENANT, "payer", SESSION)
Step = tuple[str, ...]
SCENARIOS: dict[str, list[Step]] = {
    "paused": [("run", "refund 1"), ("resolve",)],
    "held": [("held", "refund 1")],
    "prompt": [("prompt", "refund 1")],
    "subagent-paused": [("run", "delegate 1"), ("resolve",)],
    "subagent-held": [("held", "delegate 1")],
}
QUICK = {  # the default run's crash points (step, point, deny the items found open)
    "paused": [(0, "done#1", False), (1, "tool:started#1", False)],
    "held": [(0, "pending:requested#1", False), (0, "tool:started#1", False)],
    "prompt": [(0, "pending:requested#1", False), (0, "tool:result#1", False)],
    "subagent-paused": [(0, "done#2", True), (1, "tool:started#2", False)],
    "subagent-held": [(0, "pending:requested#1", False), (0, "tool:started#2", False)],
}


def ledger(folder: Path) -> Counter[str]:
    path = folder / "ledger.txt"
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()


async def step(folder: Path, argv: Step, crash: str | None) -> tuple[int, list[str]]:
    """Run one step in a process of its own; an item it says it waits on (`asked ID`) is
    approved here, by another door, while it waits. Returns its exit status and lines."""
    env = {**os.environ, "LEDGER": str(folder / "ledger.txt")}
    for name in (CRASH_ENV, LEASE_ENV):
        env.pop(name, None)
    if crash is not None:
        env[CRASH_ENV] = crash
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(folder / "db"),
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    errors = asyncio.ensure_future(process.stderr.read())
    lines = []
    async for raw in process.stdout:
        lines.append(line := raw.decode().strip())
        if line.startswith("asked "):
            await decide_elsewhere(folder, line.split()[1])
    status = await asyncio.wait_for(process.wait(), 60)
    assert status in (0, 86), (argv, crash, (await errors).decode()[-3000:])
    return status, lines


async def decide_elsewhere(folder: Path, pending_id: str) -> None:
    log = SQLiteLog(folder / "db")
    runtime = Runtime(agents(), log)
    try:
        decided = await runtime.resolve(
            TENANT, pending_id, Approval.approve(by="elsewhere"), resume=False
        )
        assert decided.status == "waiting"  # recorded: the run waiting on it goes on by itself
    finally:
        await runtime.close()
        await log.close()


async def commit_points(folder: Path, steps: list[Step]) -> list[tuple[int, str]]:
    """Every commit of the scenario run without a crash, as (step, `type#n`): the n-th commit
    holding that type in the step's process."""
    folder.mkdir()
    points: list[tuple[int, str]] = []
    seen: dict[SessionKey, int] = {}
    for number, argv in enumerate(steps):
        status, lines = await step(folder, argv, None)
        assert status == 0 and lines[-1].startswith("done "), lines
        counts: Counter[str] = Counter()
        for key, kinds in (await read_all(folder)).items():
            counts.update(k for k in kinds[seen.get(key, 0) :] if k in COMMIT_AT)
            seen[key] = len(kinds)
        points += [
            (number, f"{kind}#{n}")
            for kind in sorted(COMMIT_AT)
            for n in range(1, counts[kind] + 1)
        ]
    assert lines[-1] == "done completed"
    assert set(ledger(folder).values()) == {1}  # each call ran once
    return points


async def read_all(folder: Path) -> dict[SessionKey, list[str]]:
    """Every session's event types, in order."""
    log = SQLiteLog(folder / "db")
    try:
        sessions = (await log.sessions(TENANT)).items
        return {r.key: [s.event.type for s in await log.read(r.key)] for r in sessions}
    finally:
        await log.close()


async def crash_and_check(
    folder: Path, steps: list[Step], at: int, point: str, deny: bool, env: pytest.MonkeyPatch
) -> None:
    folder.mkdir()
    env.setenv("LEDGER", str(folder / "ledger.txt"))  # for the tools run here
    for number, argv in enumerate(steps[: at + 1]):
        status, lines = await step(folder, argv, point if number == at else None)
        if number < at:
            assert status == 0 and lines[-1].startswith("done "), lines
        else:
            assert status == 86, f"{point} was not reached: {lines}"
    log = SQLiteLog(folder / "db", clock=lambda: time.time() + 3600)
    runtime = Runtime(agents(), log)
    try:
        await check(folder, runtime, log, deny)
    finally:
        await runtime.close()
        await log.close()


async def check(folder: Path, runtime: Runtime, log: SQLiteLog, deny: bool) -> None:
    listed = await runtime.pending(TENANT)
    every = await runtime.pending(TENANT, status=None)
    assert [p.id for p in every if p.status == "open"] == [p.id for p in listed]
    decision = Approval.deny("no", by="checker") if deny else Approval.approve(by="checker")
    for item in listed:  # each is resolvable, and the last one resumes the session
        resolved = await runtime.resolve(TENANT, item.id, decision)
        assert resolved.status in ("waiting", "resumed"), resolved
        if resolved.status == "resumed":
            assert resolved.run is not None, "resumed nowhere"
            done = await resolved.run.wait()
            assert done is not None, resolved.run.failure
        call = f"refund {item.call_id}"
        assert ledger(folder)[call] == (0 if deny else 1), (call, ledger(folder))
    await finish(runtime, log)
    assert await runtime.pending(TENANT) == []
    ran = ledger(folder)
    assert set(ran.values()) <= {1}, ran  # no tool ran twice
    for item in await runtime.pending(TENANT, status=None):
        if item.status in ("skipped", "denied"):
            assert ran[f"refund {item.call_id}"] == 0, item  # shown closed: it never ran
    await check_logs(log)


async def finish(runtime: Runtime, log: SQLiteLog) -> None:
    """A session left by a dead run goes on with its next message (which recovers it)."""
    if (await log.session(ROOT)).status != "idle":
        live = await runtime.send(TENANT, "payer", SESSION, "continue")
        done = await live.wait()
        assert done is not None and done.stop_reason == "completed", live.failure
    assert (await log.session(ROOT)).status == "idle"


async def check_logs(log: SQLiteLog) -> None:
    """Every session's log is gapless and gives each call at most one result; the top-level
    session's gives each exactly one. A subagent's session whose parent's run died and whose
    parent's call was recovered (its result says it may have run) is never run again: its own
    batch is closed as a recovery closes one (each call it started says it may have run,
    `runtime.fence.abandoned`), or it stays paused with its items closed."""
    said: dict[str, str] = {}
    unfinished = []
    for record in (await log.sessions(TENANT)).items:
        stored = await log.read(record.key)
        assert [s.seq for s in stored] == list(range(1, len(stored) + 1))
        calls = Counter(
            c.id
            for s in stored
            if isinstance(s.event, ev.MessageCompleted)
            for c in s.event.message.tool_calls
        )
        results = Counter(s.event.id for s in stored if isinstance(s.event, ev.ToolResult))
        said |= {s.event.id: s.event.content for s in stored if isinstance(s.event, ev.ToolOutput)}
        if results != calls:
            assert record.parent is not None and results < calls, (record.key, results, calls)
            assert record.status == "paused"  # abandoned where it stopped, its items closed
            unfinished.append(record.key.id.rsplit("/", 1)[1])  # the parent's call
    for call_id in unfinished:
        assert said[call_id] == MAY_HAVE_RUN


@pytest.mark.long
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_after_a_crash_at_any_commit_an_item_is_resumable_or_shown_closed(
    tmp_path, monkeypatch, scenario
):
    steps = SCENARIOS[scenario]
    cases = QUICK[scenario]
    if examples(quick=0, long=1):
        points = await commit_points(tmp_path / "whole", steps)
        assert {(at, point) for at, point, _ in cases} <= set(points)
        cases = [(at, point, number % 2 == 1) for number, (at, point) in enumerate(points)]
    for number, (at, point, deny) in enumerate(cases):
        await crash_and_check(tmp_path / f"case-{number}", steps, at, point, deny, monkeypatch)
