"""What only the PostgreSQL backend has (the store's conformance suite runs on it and on SQLite:
`test_log_conformance.py`; a private server, a fresh schema per test: tests/pg_cluster.py): the
schema's versions, the database's clock, the listening connection that wakes followers, and how
a URL selects the backend."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from log_conformance import KEY, SAFETY, MakeLog, approval, reply, safely, said
from loopwright.cli.common import Place
from loopwright.errors import ConfigError
from loopwright.project import Project
from loopwright.store import StoredEvent, StoreError
from loopwright.store.log import Verdict
from loopwright.store.opening import log_at, open_log
from loopwright.store.pg_log import PostgresLog
from loopwright.store.sqlite_log import SQLiteLog
from runtime_fixtures import pg_logs  # noqa: F401 (the fixture)

TABLES = {"controls", "events", "pending", "schema", "sessions", "snapshots", "usage"} | {
    "outbox",
    "deliveries",
    "delivery_attempts",
    "notify_targets",
    "notify_keys",
    "attachments",
}


@pytest.fixture
def make_log(pg_logs: MakeLog) -> MakeLog:  # noqa: F811
    """One more `PostgresLog` on the test's schema (`pg_logs`, with its options)."""
    return pg_logs


async def test_the_schema_is_made_once_and_a_newer_one_is_refused(pg_url: str) -> None:
    logs = await asyncio.gather(*(PostgresLog(pg_url).open() for _ in range(4)))  # at once
    for log in logs:
        await log.close()
    with psycopg.connect(pg_url, autocommit=True) as db:
        assert db.execute("SELECT version FROM loopwright_schema").fetchall() == [(6,)]
        tables = db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        assert {name.removeprefix("loopwright_") for (name,) in tables} == TABLES
        db.execute("UPDATE loopwright_schema SET version = 7")
    newer = r"schema version 7 is newer than this loopwright knows \(6\); upgrade loopwright"
    with pytest.raises(StoreError, match=newer):
        await open_log(pg_url)


async def test_an_unreachable_server_fails_clearly_and_is_tried_again(
    pg_url: str, unused_tcp_port: int
) -> None:
    log = PostgresLog(f"postgresql://ann:secret@127.0.0.1:{unused_tcp_port}/shop")
    for _ in range(2):  # each call tries again
        with pytest.raises(StoreError) as failed:
            await log.read(KEY)
        message = str(failed.value)
        assert message.startswith(f"postgresql://ann@127.0.0.1:{unused_tcp_port}/shop: cannot open")
        assert "secret" not in message
    await log.close()
    with pytest.raises(StoreError, match="the log is closed"):
        await log.read(KEY)


async def test_leases_go_by_the_databases_clock(make_log: MakeLog, pg_url: str) -> None:
    log = await make_log()  # no clock of its own
    with psycopg.connect(pg_url) as db:
        clock = "SELECT extract(epoch FROM clock_timestamp())::float8"
        before = db.execute(clock).fetchone()[0]  # type: ignore[index]
        lease = (await log.claim(KEY, "run-1", ttl=30)).lease
        after = db.execute(clock).fetchone()[0]  # type: ignore[index]
    assert before + 30 <= lease.expires <= after + 30
    renewed = await log.renew(lease, ttl=600)
    assert renewed.expires > lease.expires
    assert (await log.session(KEY)).lease_expires == renewed.expires


async def test_connections_broken_by_a_restarted_server_are_replaced(
    make_log: MakeLog, pg_url: str
) -> None:
    log = await make_log(pool_size=3)
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await asyncio.gather(*(log.read(KEY) for _ in range(3)))  # the pool holds a few now
    kill = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database() "
        "AND backend_type = 'client backend'"
    )
    for n in range(2):  # a read, then a write, each on a connection broken meanwhile
        with psycopg.connect(pg_url, autocommit=True) as db:
            assert db.execute(kill).fetchone()[0] >= 1  # type: ignore[index]
        assert [s.event for s in await log.read(KEY)] == [said("hi")] * n
        with psycopg.connect(pg_url, autocommit=True) as db:
            db.execute(kill)
        assert await log.append(lease, [said("hi")]) == n + 1


class Reads:
    """Every read `log.follow` makes, as it makes it (`parked(n)` waits for n empty ones)."""

    def __init__(self, log: PostgresLog) -> None:
        self.made: list[list[StoredEvent]] = []
        self.changed = asyncio.Event()
        real = log._read

        async def read(sid: int, after: int, limit: int | None) -> list[StoredEvent]:
            rows = await real(sid, after, limit)
            self.made.append(rows)
            self.changed.set()
            return rows

        log._read = read  # type: ignore[method-assign]

    async def parked(self, n: int) -> None:
        """Until the follower read nothing new `n` times (it then waits for a wake-up)."""
        while sum(1 for rows in self.made if not rows) < n:
            self.changed.clear()
            await safely(self.changed.wait())


async def test_a_lost_listening_connection_is_opened_again_and_nothing_is_missed(
    make_log: MakeLog, pg_url: str
) -> None:
    writer = await make_log()
    reader = await make_log(recheck=3600)  # no safety re-read: only the listener wakes it
    assert isinstance(reader, PostgresLog)
    lease = (await writer.claim(KEY, "run-1", ttl=30)).lease
    reads = Reads(reader)
    following = reader.follow(KEY, after=0)
    coming = asyncio.ensure_future(anext(following))
    await reads.parked(1)
    await writer.append(lease, [said("0")])
    assert (await safely(coming)).event == said("0")

    wakeups = reader._wakeups
    assert wakeups is not None and wakeups.pid is not None and wakeups.connections == 1
    down, back = asyncio.Event(), asyncio.Event()

    async def held(seconds: float) -> None:
        down.set()
        await back.wait()

    wakeups.sleep = held
    coming = asyncio.ensure_future(anext(following))
    await reads.parked(2)
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("SELECT pg_terminate_backend(%s)", (wakeups.pid,))
    await safely(down.wait())
    await reads.parked(3)  # woken when it was lost, read nothing, parked again
    await writer.append(lease, [said("1")])  # nobody listens: its notification is lost
    assert not coming.done()
    back.set()  # listening again, the follower reads from its last seq
    assert (await safely(coming)).event == said("1")
    assert wakeups.connections == 2
    await following.aclose()


async def test_a_missed_notification_is_made_up_by_the_safety_reread(make_log: MakeLog) -> None:
    writer = await make_log()
    reader = await make_log(recheck=0.01)
    assert isinstance(reader, PostgresLog)
    lease = (await writer.claim(KEY, "run-1", ttl=30)).lease
    following = reader.follow(KEY, after=0)
    assert reader._wakeups is not None
    reader._wakeups._heard = lambda payload: None  # type: ignore[method-assign] # deaf
    async with asyncio.timeout(SAFETY):
        for n in range(3):
            coming = asyncio.ensure_future(anext(following))
            await writer.append(lease, [said(str(n))])
            assert (await coming).seq == n + 1
    await following.aclose()


async def test_a_waiting_decision_wakes_on_a_notification_only(make_log: MakeLog) -> None:
    """`wait_decided` on one instance (no re-read for an hour) wakes when another decides."""
    approver = await make_log()
    waiter = await make_log(recheck=3600)
    lease = (await approver.claim(KEY, "run-1", ttl=30)).lease
    await approver.append(lease, [said("x"), reply(), approval("p-1")])
    asked = asyncio.Event()
    real = waiter.pending_item

    async def pending_item(tenant: str, pending_id: str) -> Any:
        item = await real(tenant, pending_id)
        asked.set()  # found open: it waits for a wake-up
        return item

    waiter.pending_item = pending_item  # type: ignore[method-assign]
    decided = asyncio.ensure_future(waiter.wait_decided("acme", "p-1"))
    await safely(asked.wait())
    result = await approver.decide("acme", "p-1", Verdict("approved", "ann"))
    assert await safely(decided) == result.item


async def test_a_url_selects_postgresql(pg_url: str, tmp_path: Path, monkeypatch) -> None:
    for scheme in ("postgresql://", "postgres://"):
        log = await open_log(pg_url.replace("postgresql://", scheme))
        assert isinstance(log, PostgresLog) and log.where.startswith("postgresql://")
        await log.close()
    (tmp_path / "loopwright.toml").write_text('[store]\nurl = "postgresql://db/one"\n')
    monkeypatch.setenv("LOOPWRIGHT_STORE_URL", pg_url)
    log = await Place(tmp_path).log()  # the CLI's
    assert isinstance(log, PostgresLog) and log.conninfo == pg_url
    await log.close()


async def test_the_environment_then_the_settings_choose_the_store(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("LOOPWRIGHT_STORE_URL", raising=False)
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    project = Project(root=tmp_path)
    assert project.store_url() == tmp_path / ".loopwright/loopwright.db"
    project.settings = {"store": {"url": "postgresql://db/one", "path": "x.db"}}
    assert project.store_url() == "postgresql://db/one"
    monkeypatch.setenv("LOOPWRIGHT_STORE_URL", "postgres://db/two")  # the environment wins
    assert project.store_url() == "postgres://db/two"
    log = log_at(project.store_url())  # the server's: made without a loop, connects later
    assert isinstance(log, PostgresLog) and log.where == "postgresql://db/two"
    sqlite = log_at(tmp_path / "x.db")
    assert isinstance(sqlite, SQLiteLog)
    await sqlite.close()
    project.settings = {"store": {"url": 5}}
    monkeypatch.delenv("LOOPWRIGHT_STORE_URL")
    with pytest.raises(ConfigError, match=r"\[store\] url must be a string"):
        project.store_url()


async def test_without_psycopg_the_error_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "loopwright.store.pg_log", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'loopwright\[postgres\]'"):
        await open_log("postgresql://localhost/db")
