"""Opening the event log a path or URL names (`open_log`, `log_at`): a SQLite file or a
PostgreSQL database, each backend imported only when it is the one asked for."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .log import POOL_SIZE, Store, is_postgres
from .records import StoreError, data_dir

if TYPE_CHECKING:
    from .pg_log import PostgresLog

logger = logging.getLogger("loopwright.store")


async def open_log(path_or_url: str | Path | None = None, *, pool_size: int | None = None) -> Store:
    """The event log at `path_or_url`: a SQLite file (a path or `sqlite:///path`), by default
    `loopwright.db` in the data directory (as `open_store`), or a PostgreSQL database
    (`postgresql://…` or `postgres://…`, with `loopwright[postgres]`), whose pool opens at most
    `pool_size` connections (`POOL_SIZE` by default; a SQLite file has no pool). Opening
    migrates an older database and refuses a foreign one or one newer than this loopwright
    (`StoreError`)."""
    if isinstance(path_or_url, str) and is_postgres(path_or_url):
        return await _postgres(path_or_url, pool_size).open()
    return await asyncio.to_thread(log_at, path_or_url, pool_size=pool_size)


def log_at(path_or_url: str | Path | None = None, *, pool_size: int | None = None) -> Store:
    """The event log at `path_or_url` (as `open_log`), made without an event loop: a SQLite file
    is opened now (blocking), a PostgreSQL database is connected to on first use."""
    if isinstance(path_or_url, str) and is_postgres(path_or_url):
        return _postgres(path_or_url, pool_size)
    from .sqlite_log import SQLiteLog

    if path_or_url is None:
        path = data_dir() / "loopwright.db"
    elif isinstance(path_or_url, Path) or "://" not in path_or_url:
        path = Path(path_or_url)
    elif path_or_url.startswith("sqlite:///"):
        path = Path(path_or_url.removeprefix("sqlite:///"))
    else:
        scheme = path_or_url.partition("://")[0]
        raise StoreError(
            f"no event log backend for {scheme}:// URLs (sqlite:///path and postgresql://… are)"
        )
    if pool_size is not None:  # (set for a PostgreSQL log that this deployment does not use)
        logger.warning(
            "pool_size %s is not used: the SQLite event log %s has no pool", pool_size, path
        )
    return SQLiteLog(path)


def _postgres(url: str, pool_size: int | None) -> PostgresLog:
    try:
        from .pg_log import PostgresLog
    except ImportError as exc:
        raise ConfigError(
            f"a PostgreSQL event log needs psycopg ({exc}): pip install 'loopwright[postgres]'"
        ) from None
    return PostgresLog(url, pool_size=POOL_SIZE if pool_size is None else pool_size)
