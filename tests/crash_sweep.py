"""The crash model checker (issue 30, point 5): every scenario of crash_scenarios.py, stopped
at every boundary (crash_model.py) on SQLite and on PostgreSQL, recovered and checked
(crash_checks.py). The count of scenarios and boundaries is printed at the end of the run."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from crash_checks import Clock, OpenLog, run_case
from crash_model import Kind, boundaries
from crash_scenarios import SCENARIOS, Scenario
from long_run import examples
from loopwright.store.log import EventLog
from loopwright.store.sqlite_log import SQLiteLog

BY_NAME = {s.name: s for s in SCENARIOS}


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenLog]:
    if request.param == "sqlite":

        async def sqlite(clock: Clock) -> EventLog:
            return SQLiteLog(tmp_path / "crash.db", clock=clock)

        yield sqlite
        return
    from loopwright.store.pg_log import PostgresLog

    url = request.getfixturevalue("pg_url")

    async def postgres(clock: Clock) -> EventLog:
        return await PostgresLog(url, clock=clock, pool_size=2).open()

    yield postgres


async def sweep(
    open_log: OpenLog, scenario: Scenario, kinds: tuple[Kind, ...]
) -> tuple[int, dict[str, list[str]]]:
    """Run `scenario` once whole, then stopped at each boundary; (boundaries, violations by
    boundary)."""
    clean = await run_case(open_log, scenario, "whole", None)
    assert clean.completed and clean.violations == [], clean.violations
    found: dict[str, list[str]] = {}
    every = boundaries(clean.writes, kinds)
    for number, (fault, name) in enumerate(every):
        result = await run_case(open_log, scenario, f"case-{number}", fault)
        if result.violations:
            found[f"{fault.kind}@{name}"] = result.violations
    return len(every), found


WINDOWS = [  # (name, pattern of one of a case's violations), the first that matches names it
    ("window 4: takeover then late effect", r"did not complete, and it ran after the takeover"),
    ("window 1: decision before crash", r"is paused on pending items \(\): resolve them"),
    ("window 2: approval after CLI kill", r"its run died waiting on pending items"),
    ("new: an item decided before its pending:requested", r"^P4:  was approved"),
    ("new: a subagent outlives its parent's takeover", r"s1/billing/bill-1 got|sub-1's item is"),
    ("new: a subagent's approval lost in a crash", r"sub-1 was approved and never ran"),
    ("new: a late release accepted after a takeover", r"had its release taken"),
    ("new: a late append accepted after a takeover", r"had its append taken"),
    ("as documented: a dead subagent's session stays as it stopped", r"sub-1 was started"),
]


def window_of(violations: list[str]) -> str:
    for name, pattern in WINDOWS:
        if any(re.search(pattern, v) for v in violations):
            return name
    return "unknown"


@pytest.mark.parametrize("name", list(BY_NAME))
async def test_every_boundary(backend: OpenLog, name: str, record_property: Any) -> None:
    """Each case either keeps P1-P4 or shows a window named in `WINDOWS` (each of which has an
    xfail case of its own below); a violation no window explains fails. By default crashes
    at every boundary (and, on SQLite, freezes too); `--long`, both kinds on both backends."""
    sqlite = "sqlite" in getattr(backend, "__name__", "")
    kinds: tuple[Kind, ...] = ("crash", "freeze") if examples(sqlite, 1) else ("crash",)
    if not examples(sqlite or name in QUICK_PG, 1):
        pytest.skip("the long run's (PostgreSQL: every scenario)")
    count, found = await sweep(backend, BY_NAME[name], kinds)
    windows: dict[str, list[str]] = {}
    for where, violations in found.items():
        windows.setdefault(window_of(violations), []).append(where)
    record_property("crash_model", {"boundaries": count, "windows": windows})
    unknown = {w: found[w] for w in windows.get("unknown", [])}
    assert unknown == {}


QUICK_PG = {"tool-call", "approval", "steer", "webhook-outbox"}
CASES = [  # (window, scenario, boundary): each must keep P1-P4 once its window is closed
    ("window 1: decision before crash", "approval", "crash@resolve:decide#1:after"),
    ("window 2: approval after CLI kill", "cli-prompt", "crash@prompt:append#2:after"),
    ("window 4: takeover then late effect", "tool-call", "freeze@run:append#2:after"),
    ("new: an item decided before its pending:requested", "approval", "crash@run:append#1:after"),
    (
        "new: a subagent outlives its parent's takeover",
        "subagent-approval",
        "freeze@run:append#3:after",
    ),
    ("new: a subagent's approval lost in a crash", "subagent-approval", "crash@run:append#5:after"),
    ("new: a late release accepted after a takeover", "approval", "freeze@run:append#3:after"),
]


@pytest.mark.parametrize(
    ("window", "name", "where"),
    [
        pytest.param(
            *case,
            id=case[0].replace(" ", "-"),
            marks=pytest.mark.xfail(strict=True, reason=f"issue 30 {case[0]}"),
        )
        for case in CASES
    ],
)
async def test_window(backend: OpenLog, window: str, name: str, where: str) -> None:
    scenario = BY_NAME[name]
    clean = await run_case(backend, scenario, "whole", None)
    kind, _, boundary = where.partition("@")
    [fault] = [f for f, n in boundaries(clean.writes, (kind,)) if n == boundary]  # type: ignore[arg-type]
    result = await run_case(backend, scenario, "case", fault)
    assert result.violations == [], window_of(result.violations)
