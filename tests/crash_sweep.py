"""The crash model checker's tests (issue 30, point 5), written once for both backends: every
scenario of crash_scenarios.py, stopped at every boundary (crash_model.py), recovered and
checked (crash_checks.py). test_crash_model_sqlite.py and test_crash_model_postgres.py run
them, each on its backend (two files, so that `--dist loadfile` runs them side by side); the
count of scenarios and boundaries is printed at the end of the run."""

from __future__ import annotations

import re
from typing import Any

import pytest

from crash_checks import OpenLog, run_case
from crash_model import Kind, boundaries
from crash_scenarios import SCENARIOS, Scenario
from long_run import examples

BY_NAME = {s.name: s for s in SCENARIOS}
QUICK_PG = {"tool-call", "approval", "steer", "webhook-outbox", "large-result"}
"""The scenarios PostgreSQL sweeps by default (every one under `--long`)."""


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


WINDOWS: list[tuple[str, str]] = []  # (name, pattern of one of a case's violations): the first
# that matches names it (each has a case in `OPEN`); none is open now


def window_of(violations: list[str]) -> str:
    for name, pattern in WINDOWS:
        if any(re.search(pattern, v) for v in violations):
            return name
    return "unknown"


async def every_boundary(open_log: OpenLog, sqlite: bool, name: str, record: Any) -> None:
    """Each case keeps P1-P4, or shows a window named in `WINDOWS`; a violation no window
    explains fails. By default crashes at every boundary (and, on SQLite, freezes too);
    `--long`, both kinds on both backends."""
    kinds: tuple[Kind, ...] = ("crash", "freeze") if examples(sqlite, 1) else ("crash",)
    if not examples(sqlite or name in QUICK_PG, 1):
        pytest.skip("the long run's (PostgreSQL: every scenario)")
    count, found = await sweep(open_log, BY_NAME[name], kinds)
    windows: dict[str, list[str]] = {}
    for where, violations in found.items():
        windows.setdefault(window_of(violations), []).append(where)
    record("crash_model", {"boundaries": count, "windows": windows})
    unknown = {w: found[w] for w in windows.get("unknown", [])}
    assert unknown == {}


CASES = [  # (window, scenario, boundary): each was a window of issue 30, and keeps P1-P4 now
    # (boundaries as numbered since a reply is committed with what follows it, issue 32)
    ("window 1: decision before crash", "approval", "crash@resolve:decide#1:after"),
    ("window 1: the resumer died after its claim", "approval", "crash@resolve:claim#1:after"),
    ("window 1: the resumer froze after its claim", "approval", "freeze@resolve:claim#1:after"),
    ("window 1: an answer before crash", "question", "crash@resolve:claim#1:after"),
    ("window 2: approval after CLI kill", "cli-prompt", "crash@prompt:append#1:after"),
    ("window 4: takeover then late effect", "tool-call", "freeze@run:append#1:after"),
    ("an approved call cut at its intent", "approval", "crash@resolve:append#1:after"),
    ("a prompt's approved call cut at its intent", "cli-prompt", "crash@prompt:append#2:after"),
    ("a late release accepted after a takeover", "approval", "freeze@run:append#1:after"),
    ("a subagent outlives its parent's takeover", "subagent-approval", "freeze@run:append#2:after"),
    ("a subagent's approval lost in a crash", "subagent-approval", "crash@run:append#3:after"),
    ("a paused subagent's late release", "subagent-approval", "freeze@run:append#4:after"),
    (
        "a subagent released paused, its parent dead",
        "subagent-approval",
        "crash@run:release#1:after",
    ),
    (
        "a subagent paused, its parent's resumption dead",
        "subagent-approval",
        "crash@resolve:append#1:after",
    ),
    (
        "a subagent claimed after its parent's takeover",
        "subagent-approval",
        "freeze@send:append#2:after",
    ),
    (
        "a dead subagent's started call has a result",
        "subagent-approval",
        "crash@resolve:append#2:after",
    ),
    ("a write in flight as its process froze", "subagent-approval", "freeze@run:append#3:after"),
]


OPEN: list[tuple[str, str, str]] = []  # (window, scenario, boundary): windows still open (xfail)


def case_params(cases: list[tuple[str, str, str]]) -> list[Any]:
    every = [pytest.param(*case, id=case[0].replace(" ", "-")) for case in cases]
    for case in OPEN:
        mark = pytest.mark.xfail(strict=True, reason=f"issue 30 {case[0]}")
        every.append(pytest.param(*case, id=case[0].replace(" ", "-"), marks=mark))
    return every


async def window_case(open_log: OpenLog, window: str, name: str, where: str) -> None:
    """The scenario stopped at that one boundary keeps P1-P4."""
    scenario = BY_NAME[name]
    clean = await run_case(open_log, scenario, "whole", None)
    kind, _, boundary = where.partition("@")
    [fault] = [f for f, n in boundaries(clean.writes, (kind,)) if n == boundary]  # type: ignore[arg-type]
    result = await run_case(open_log, scenario, "case", fault)
    assert result.violations == [], (window, result.violations)
