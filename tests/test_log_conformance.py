"""The store's conformance suite — every seam of `store.log` (`EventLog`, `Decisions`,
`Controls`, `ReadModels`, `Store`) and the outbox — one suite, each case run on both backends:
SQLite (a real file per test) and PostgreSQL (a private server, a fresh schema per test:
tests/pg_cluster.py). The cases are in `log_conformance*.py`; what only one backend has is in
`test_log_sqlite.py` and `test_log_postgres.py`."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from log_conformance import *  # noqa: F403
from log_conformance import MakeLog
from log_conformance_controls import *  # noqa: F403
from log_conformance_decisions import *  # noqa: F403
from log_conformance_forks import *  # noqa: F403
from log_conformance_outbox import *  # noqa: F403
from log_conformance_read_models import *  # noqa: F403
from log_conformance_usage import *  # noqa: F403
from loopwright.store.log import Controls, Decisions, EventLog, Forks, ReadModels, Store
from loopwright.store.outbox import Outbox
from runtime_fixtures import logs, pg_logs  # noqa: F401 (the fixtures)

SEAMS = (EventLog, Decisions, Controls, ReadModels, Forks, Store, Outbox)
CASES = sorted(Path(__file__).parent.glob("log_conformance*.py"))


@pytest.fixture(params=["sqlite", "postgres"])
def make_log(request: pytest.FixtureRequest) -> MakeLog:
    """One more instance of the backend on the test's storage (`logs`: a SQLite file;
    `pg_logs`: a PostgreSQL schema)."""
    fixture = "logs" if request.param == "sqlite" else "pg_logs"
    made: MakeLog = request.getfixturevalue(fixture)
    return made


def methods(seam: type) -> list[str]:
    """The methods a seam declares itself (not those of the seams it bundles)."""
    return [n for n, v in vars(seam).items() if inspect.isfunction(v) and not n.startswith("_")]


def test_the_event_log_is_at_most_eight_methods() -> None:
    """Issue 30: one narrow log; the rest are seams of their own."""
    assert methods(EventLog) == [
        "claim",
        "renew",
        "release",
        "append",
        "read",
        "follow",
        "snapshot",
        "save_snapshot",
    ]
    assert [len(methods(seam)) for seam in SEAMS] == [8, 2, 4, 8, 1, 1, 9]


def test_the_suite_calls_every_method_of_every_seam() -> None:
    text = "\n".join(case.read_text() for case in CASES)
    missing = [
        f"{seam.__name__}.{name}"
        for seam in SEAMS
        for name in methods(seam)
        if not re.search(rf"\.{name}\(", text)
    ]
    assert missing == []
