"""The crash model checker on SQLite (crash_sweep.py: every scenario at every boundary, and
each of issue 30's windows as a case of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crash_checks import Clock, OpenLog
from crash_sweep import BY_NAME, CASES, case_params, every_boundary, window_case
from loopwright.store.log import EventLog
from loopwright.store.sqlite_log import SQLiteLog


@pytest.fixture
def backend(tmp_path: Path) -> OpenLog:
    async def sqlite(clock: Clock) -> EventLog:
        return SQLiteLog(tmp_path / "crash.db", clock=clock)

    return sqlite


@pytest.mark.long
@pytest.mark.parametrize("name", list(BY_NAME))
async def test_every_boundary(backend: OpenLog, name: str, record_property: Any) -> None:
    await every_boundary(backend, True, name, record_property)


@pytest.mark.parametrize(("window", "name", "where"), case_params(CASES))
async def test_window(backend: OpenLog, window: str, name: str, where: str) -> None:
    await window_case(backend, window, name, where)
