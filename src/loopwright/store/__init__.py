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
defined here; the session's own record (`SessionRecord`) is the log's (`store.log`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import LoopwrightError
from ..events import Event

SessionStatus = Literal["idle", "running", "paused", "interrupted"]
PendingStatus = Literal["open", "approved", "denied", "answered", "skipped"]


class StoreError(LoopwrightError):
    """The store cannot do what was asked: a corrupt, foreign, locked or full database."""


class StaleWriter(StoreError):
    """This writer's claim on the session was taken over; its appends are refused."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the log holds it: its per-session sequence number and when it was committed."""

    seq: int
    event: Event
    at: str


@dataclass(frozen=True, slots=True)
class PendingRecord:
    """A pending approval or question, and who decided it, when, and with what."""

    id: str
    session_id: str
    tenant: str
    agent: str
    kind: Literal["approval", "question"]
    call_id: str
    tool: str
    args: dict[str, Any]
    reason: str
    requested_at: str
    batch_seq: int
    """Sequence number of the reply whose calls form the batch (the checkpoint)."""
    status: PendingStatus = "open"
    decided_by: str | None = None
    decided_at: str | None = None
    edited_args: dict[str, Any] | None = None
    answer: str | None = None
    note: str | None = None
    """The approver's reason, when given."""


def data_dir(project: str | Path | None = None) -> Path:
    """`$LOOPWRIGHT_HOME`, else `<project>/.loopwright` (the current directory by default)."""
    home = os.environ.get("LOOPWRIGHT_HOME")
    if home:
        return Path(home)
    return Path(project or ".") / ".loopwright"


from .log import EventLog, SessionKey, Store, open_log  # noqa: E402 (log.py reads the records above)

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
