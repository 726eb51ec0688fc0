"""What the fork tests share: a real log on either backend (a SQLite file, a PostgreSQL schema of
the test's own) with the raw rows of one session read straight from its tables, to show that a
fork leaves its source byte for byte as it was."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwright.store.log import SessionKey, Store
from loopwright.store.sql import POSTGRES, SQLITE, Dialect

__all__ = ["backend"]  # the fixture; import the rest by name

ROWS = {
    "sessions": "SELECT * FROM {sessions} WHERE id = ?",
    "events": "SELECT * FROM {events} WHERE session = ? ORDER BY seq",
    "pending": "SELECT * FROM {pending} WHERE session = ? ORDER BY id",
    "usage": "SELECT * FROM {usage} WHERE session = ? ORDER BY seq",
    "snapshots": "SELECT * FROM {snapshots} WHERE session = ?",
}


@dataclass
class Backend:
    """`await backend.log()`: one more log on the test's storage; `backend.rows(key)`: the
    session's rows in every table, as stored; `url`: the store (a SQLite file's path, or a
    PostgreSQL URL)."""

    name: str
    log: Callable[[], Awaitable[Store]]
    url: str

    def rows(self, key: SessionKey) -> dict[str, list[tuple[Any, ...]]]:
        d: Dialect = POSTGRES if self.name == "postgres" else SQLITE
        find = d("SELECT id FROM {sessions} WHERE tenant = ? AND agent = ? AND name = ?")
        if self.name == "sqlite":
            with sqlite3.connect(self.url) as db:
                (sid,) = db.execute(find, (key.tenant, key.agent, key.id)).fetchone()
                return {t: db.execute(d(q), (sid,)).fetchall() for t, q in ROWS.items()}
        import psycopg

        with psycopg.connect(self.url) as pg:
            found = pg.execute(find, (key.tenant, key.agent, key.id)).fetchone()
            assert found is not None
            return {t: pg.execute(d(q), (found[0],)).fetchall() for t, q in ROWS.items()}


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The log of `runtime_fixtures.logs` (SQLite: tmp_path's file) or `pg_logs`."""
    if request.param == "sqlite":
        made = request.getfixturevalue("logs")
        return Backend("sqlite", made, str(tmp_path / "loopwright.db"))
    made = request.getfixturevalue("pg_logs")
    return Backend("postgres", made, request.getfixturevalue("pg_url"))
