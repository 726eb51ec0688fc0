"""Durable sessions: where they live, and the records read from them.

A session is one append-only log of events named by (tenant, agent, id), in a `Store`
(`store.log`: its seams — the `EventLog` itself, `Decisions`, `Controls`, `ReadModels` — and
who uses which; `store.sqlite_log`: SQLite, the embedded default; `store.pg_log`: PostgreSQL).
Its status, pending items and usage rows are derived from its events as they are appended. A `Runtime`
(`loopwright.runtime`) drives sessions over a log; `runtime.open_session` opens one for a
script; `store.export` writes a session out as JSON lines or as its model contexts.

    log = await open_log()            # .loopwright/loopwright.db, or $LOOPWRIGHT_HOME
    runtime = Runtime({"support": agent}, log)
    run = await runtime.send("acme", "support", "s-1", "hello")

The records (`StoredEvent`, `PendingRecord`) and errors (`StoreError`, `StaleWriter`) are
`store.records`' (named here too); the session's own record (`SessionRecord`) is the log's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from .log import EventLog, SessionKey, Store
    from .opening import open_log
    from .records import (
        PendingRecord,
        PendingStatus,
        SessionStatus,
        StaleWriter,
        StoredEvent,
        StoreError,
        data_dir,
    )

__all__ = [
    "EventLog",
    "PendingRecord",
    "PendingStatus",
    "SessionKey",
    "SessionStatus",
    "StaleWriter",
    "Store",
    "StoreError",
    "StoredEvent",
    "data_dir",
    "open_log",
]

_WHERE = {
    "EventLog": "log",
    "SessionKey": "log",
    "Store": "log",
    "open_log": "opening",
    "PendingRecord": "records",
    "PendingStatus": "records",
    "SessionStatus": "records",
    "StaleWriter": "records",
    "StoredEvent": "records",
    "StoreError": "records",
    "data_dir": "records",
}
__getattr__, __dir__ = exports(__name__, _WHERE, __all__)
