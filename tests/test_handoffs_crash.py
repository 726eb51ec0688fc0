"""A handoff at every store-write boundary (the crash model's `handoff` scenario, on SQLite, in
the default run; `--long` sweeps it on PostgreSQL too): stopped anywhere — between the transfer
call and its result, between the result and `agent:handoff`, between the handoff and the next
step — and recovered a lease later, the session is with the target agent (`crash_checks.
handed_off`), and P1-P4 hold."""

from __future__ import annotations

from pathlib import Path

from crash_checks import Clock
from crash_sweep import BY_NAME, sweep
from loopwright.store.log import EventLog
from loopwright.store.sqlite_log import SQLiteLog


async def test_a_handoff_survives_a_crash_at_every_boundary(tmp_path: Path) -> None:
    async def sqlite(clock: Clock) -> EventLog:
        return SQLiteLog(tmp_path / "crash.db", clock=clock)

    count, found = await sweep(sqlite, BY_NAME["handoff"], ("crash", "freeze"))
    assert count == 26 and found == {}
