"""The event-log conformance suite on `PostgresLog` (a private server, a fresh schema per test:
tests/pg_cluster.py), and what only PostgreSQL has: the schema's versions, the listening
connection that wakes followers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from log_conformance import *  # noqa: F403
from log_conformance import MakeLog
from log_conformance_decisions import *  # noqa: F403
from loopwright.store.log import EventLog
from loopwright.store.pg_log import PostgresLog


@pytest.fixture
async def make_log(pg_conninfo: str) -> AsyncIterator[MakeLog]:
    """One more `PostgresLog` on the test's schema (the database's clock unless given one)."""
    opened: list[PostgresLog] = []

    async def make(clock: Callable[[], float] | None = None) -> EventLog:
        log = await PostgresLog(pg_conninfo, clock=clock).open()
        opened.append(log)
        return log

    yield make
    for log in opened:
        await log.close()
