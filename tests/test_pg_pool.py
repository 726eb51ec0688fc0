"""The PostgreSQL event log's pool size: `PostgresLog(pool_size=N)` (psycopg_pool's `max_size`),
`[store] pool_size` in loopwright.toml or `$LOOPWRIGHT_STORE_POOL_SIZE` (which wins, as
`$LOOPWRIGHT_STORE_URL` does) for the command line and the server; anything but a positive
integer is a `ConfigError` naming where it came from."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from loopwright.cli.common import Place
from loopwright.errors import ConfigError
from loopwright.project import Project, load_project
from loopwright.server import create_app
from loopwright.store.log import POOL_SIZE
from loopwright.store.opening import open_log
from loopwright.store.pg_log import PostgresLog
from loopwright.store.pg_rows import Db


@pytest.fixture(autouse=True)
def no_store_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOOPWRIGHT_STORE_URL", "LOOPWRIGHT_STORE_POOL_SIZE", "LOOPWRIGHT_HOME"):
        monkeypatch.delenv(name, raising=False)


async def test_a_log_built_with_a_pool_size_has_a_pool_of_that_size(pg_url: str) -> None:
    log = await PostgresLog(pg_url, pool_size=3).open()
    try:
        pool = log.db.pool
        assert pool is not None and (pool.min_size, pool.max_size) == (1, 3)
        # three jobs at once each hold a connection of their own until all three hold one
        holding, every = [], asyncio.Event()

        async def job(db: Db) -> int:
            row = await (await db.execute("SELECT pg_backend_pid()")).fetchone()
            assert row is not None
            holding.append(row[0])
            if len(holding) == 3:
                every.set()
            await every.wait()
            return int(row[0])

        async with asyncio.timeout(60):  # (a safety net: a pool of fewer would never end)
            pids = await asyncio.gather(*(log._run(job) for _ in range(3)))
        assert len(set(pids)) == 3 and pool.get_stats()["pool_size"] == 3
    finally:
        await log.close()
    default = await open_log(pg_url)
    sized = await open_log(pg_url, pool_size=4)
    try:
        assert isinstance(default, PostgresLog) and isinstance(sized, PostgresLog)
        assert [log.db.pool.max_size for log in (default, sized) if log.db.pool] == [POOL_SIZE, 4]
    finally:
        await default.close()
        await sized.close()


async def test_the_settings_then_the_environment_size_the_pool(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "loopwright.toml").write_text(f'[store]\nurl = "{pg_url}"\npool_size = 5\n')
    place = Place(tmp_path)  # the command line's
    for env, size in ((None, 5), ("6", 6)):
        if env is not None:
            monkeypatch.setenv("LOOPWRIGHT_STORE_POOL_SIZE", env)
        log = await place.log()
        try:
            assert isinstance(log, PostgresLog) and log.db.pool is not None
            assert log.db.pool.max_size == size
        finally:
            await log.close()
    app = create_app(load_project(tmp_path))  # the server's (connects on first use)
    log = app.state.loopwright.runtime.log
    try:
        assert isinstance(log, PostgresLog) and log.db.pool_size == 6
    finally:
        await log.close()


@pytest.mark.parametrize("size", [0, -1, 2.5, "4", True, None])
def test_a_pool_size_that_is_not_a_positive_integer_is_refused(size: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        PostgresLog("postgresql://db.invalid/x", pool_size=size)
    assert str(refused.value) == f"pool_size must be a positive integer, not {size!r}"


@pytest.mark.parametrize("size", [0, -3, 1.5, "ten", False])
def test_a_bad_pool_size_setting_is_a_config_error_naming_the_file(
    tmp_path: Path, size: Any
) -> None:
    project = Project(root=tmp_path, settings={"store": {"pool_size": size}})
    with pytest.raises(ConfigError) as refused:
        project.store_pool_size()
    toml = tmp_path / "loopwright.toml"
    assert str(refused.value) == (
        f"{toml}: [store] pool_size must be a positive integer, not {size!r}"
    )
    assert refused.value.source == str(toml)


@pytest.mark.parametrize(("text", "shown"), [("0", "0"), ("-2", "'-2'"), ("a few", "'a few'")])
def test_a_bad_pool_size_in_the_environment_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, shown: str
) -> None:
    monkeypatch.setenv("LOOPWRIGHT_STORE_POOL_SIZE", text)
    project = Project(root=tmp_path, settings={"store": {"pool_size": 5}})  # the env wins
    with pytest.raises(ConfigError) as refused:
        project.store_pool_size()
    assert str(refused.value) == (
        f"$LOOPWRIGHT_STORE_POOL_SIZE must be a positive integer, not {shown}"
    )


def test_no_pool_size_anywhere_is_the_logs_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Project(root=tmp_path).store_pool_size() is None
    assert Project(root=tmp_path, settings={"store": {"pool_size": 7}}).store_pool_size() == 7
    monkeypatch.setenv("LOOPWRIGHT_STORE_POOL_SIZE", " 12 ")
    assert Project(root=tmp_path).store_pool_size() == 12
    assert Place(tmp_path, bare=True).store_pool_size() == 12  # a bare folder: the env only


async def test_a_pool_size_given_to_a_sqlite_log_is_reported_unused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A SQLite file has no pool: the size (meant for PostgreSQL) is said to be unused, once,
    and the log opens as without it."""
    caplog.set_level("WARNING", logger="loopwright.store")
    log = await open_log(tmp_path / "log.db", pool_size=4)
    try:
        assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
            (
                "loopwright.store",
                "WARNING",
                f"pool_size 4 is not used: the SQLite event log {tmp_path / 'log.db'} has no pool",
            )
        ]
    finally:
        await log.close()
    caplog.clear()
    quiet = await open_log(tmp_path / "quiet.db")
    await quiet.close()
    assert caplog.records == []
