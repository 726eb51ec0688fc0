"""The ledger test of issue 33 (part 1): a tool whose effect goes to an external ledger (a bank
that books each idempotency key once, `crash_model.Ledger.booked`), under the crash model
checker (crash_model.py): the scenario stopped at every boundary of its writes — each store
write of the runs around its calls, and between a call's effect and the commit of its result —
as a crash (a fresh runtime recovers a lease later and re-runs the idempotent calls cut short)
and as a freeze (the frozen process, let go on after the takeover, attempts its call late). In
every case P1-P4 hold (crash_checks.check, with `keys_kept`): an effect may be attempted twice,
but every attempt of a call carries the key logged at its start, and the bank books it once.

`pay 1` then `pay 2`: two calls of `pay` with the same arguments in each reply, and the same
call ids in both replies: four calls, four keys, four charges when nothing stops."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crash_checks import Clock, OpenLog, Result, run_case
from crash_model import boundaries
from crash_scenarios import Scenario, ended, send
from loopwright.store.log import EventLog
from loopwright.store.sqlite_log import SQLiteLog

LEDGER = Scenario("ledger", [send("pay 1"), ended(), send("pay 2"), ended()], {})


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> OpenLog:
    if request.param == "sqlite":

        async def sqlite(clock: Clock) -> EventLog:
            return SQLiteLog(tmp_path / "crash.db", clock=clock)

        return sqlite
    pg_url = request.getfixturevalue("pg_url")
    from loopwright.store.pg_log import PostgresLog

    async def postgres(clock: Clock) -> EventLog:
        return await PostgresLog(pg_url, clock=clock, pool_size=2).open()

    return postgres


def attempts(result: Result) -> list[tuple[str, str, str]]:
    """(process, call id, key) of each attempt of `pay`, in order."""
    out = []
    for process, what in result.ledger.entries:
        if what.startswith("attempt "):
            _, call_id, key = what.split(" ")
            out.append((process, call_id, key))
    return out


async def test_every_stop_around_the_calls_books_each_payment_once(
    backend: OpenLog, record_property: Any
) -> None:
    whole = await run_case(backend, LEDGER, "whole", None)
    assert whole.completed and whole.violations == []
    tried = attempts(whole)
    assert [call_id for _, call_id, _ in tried] == ["pay-a", "pay-b", "pay-a", "pay-b"]
    assert len({key for _, _, key in tried}) == 4  # (same tool, arguments and ids: 4 calls)
    assert sorted(whole.ledger.booked.values()) == ["ch_1", "ch_2", "ch_3", "ch_4"]

    every = boundaries(whole.writes, ("crash", "freeze"))
    around = [(f, n) for f, n in every if n.startswith(("send:", "run:"))]
    assert around == every  # (every write of this scenario is a run's, around its calls)
    violations: dict[str, list[str]] = {}
    twice, taken_over = 0, 0
    for number, (fault, name) in enumerate(every):
        result = await run_case(backend, LEDGER, f"case-{number}", fault)
        if result.violations:
            violations[f"{fault.kind}@{name}"] = result.violations
        tried = attempts(result)
        by_key = Counter(key for _, _, key in tried)
        assert set(result.ledger.booked) == set(by_key)  # (each key attempted is booked once)
        twice += any(n > 1 for n in by_key.values())
        taken_over += any(
            {p for p, _, k in tried if k == key} == {"A", "B"} for key in by_key
        )  # (the old owner's late attempt and the new owner's re-run: one key)
    record_property("crash_model", {"boundaries": len(every), "windows": {}})
    assert violations == {}
    writes = whole.writes  # stops after an effect, before the write that commits its result:
    after_effect = [
        w
        for w, last in zip(writes[1:], writes, strict=False)
        if last.state_after is not None and w.state_before[0] > last.state_after[0]
    ]
    assert len(after_effect) >= 2, after_effect  # (each batch's, at least)
    print(f"ledger: {len(every)} crash points, {len(after_effect)} of each kind after an effect")
    print(f"ledger: {twice} cases attempted a call twice, {taken_over} by two processes")
    assert twice > 0 and taken_over > 0, (twice, taken_over)
