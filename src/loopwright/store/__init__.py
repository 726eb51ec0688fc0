"""Durable sessions: where they live, and the records read from them.

A session is one append-only log of events named by (tenant, agent, id), in an `EventLog`
(`store.log`: the seam; `store.sqlite_log`: SQLite, the embedded default). Its status, pending
items and usage rows are derived from its events as they are appended. A `Runtime`
(`loopwright.runtime`) drives sessions over a log; `runtime.open_session` opens one for a
script; `store.export` writes a session out as JSON lines or as its model contexts.

    log = await open_log()            # .loopwright/loopwright.db, or $LOOPWRIGHT_HOME
    runtime = Runtime({"support": agent}, log)
    run = await runtime.send("acme", "support", "s-1", "hello")

The records (`StoredEvent`, `PendingRecord`) and errors (`StoreError`, `StaleWriter`) are
defined here. The synchronous `Store` protocol, `open_store` and `SQLiteStore` are the store
before the event log, kept until the last of their users has moved.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

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
class SessionRecord:
    id: str
    tenant: str
    agent: str
    status: SessionStatus
    last_seq: int
    created_at: str
    updated_at: str


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


@dataclass(frozen=True, slots=True)
class Claim:
    """The right to append to one session, fenced by `epoch`."""

    session_id: str
    epoch: int
    owner: str


class Store(Protocol):
    """Where sessions live. Implementations must make `append` atomic and durable before it
    returns, keep `seq` gapless per session, and refuse appends from a superseded claim."""

    def claim(self, session_id: str, tenant: str, agent: str, owner: str) -> tuple[Claim, bool]:
        """Take the session for one run (an unknown id creates it). Returns the claim and
        whether the previous run died without finishing (its owner is gone). Raises
        `SessionBusy` while a live owner runs it, `UnknownSession` for another tenant's id."""
        ...

    def release(self, claim: Claim, status: SessionStatus) -> None:
        """End the run: the session becomes `status` unless the claim was superseded."""
        ...

    def append(self, claim: Claim, events: Sequence[Event]) -> int:
        """Commit events in order; returns the last sequence number. Raises `StaleWriter`."""
        ...

    def load(self, session_id: str, tenant: str, *, after: int = 0) -> list[StoredEvent]:
        """The session's events with `seq > after`; raises `UnknownSession` for a foreign or
        unknown id."""
        ...

    def session(self, session_id: str, tenant: str) -> SessionRecord: ...

    def sessions(self, tenant: str, agent: str | None = None) -> list[SessionRecord]: ...

    def pending(
        self,
        tenant: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        status: PendingStatus | None = "open",
    ) -> list[PendingRecord]: ...

    def pending_item(self, pending_id: str, tenant: str) -> PendingRecord:
        """One pending item of this tenant; `UnknownPending` otherwise."""
        ...

    def decide(
        self,
        pending_id: str,
        tenant: str,
        *,
        status: PendingStatus,
        by: str,
        edited_args: dict[str, Any] | None = None,
        answer: str | None = None,
        note: str | None = None,
    ) -> tuple[bool, int]:
        """Record a decision atomically. A denial skips the batch's other open items. Returns
        (whether this call changed anything, items of the batch still open)."""
        ...

    def usage_totals(self, tenant: str, *, session_id: str | None = None) -> dict[str, Any]:
        """Model requests, tokens (input, output, cache read/write) and cost, summed."""
        ...

    def close(self) -> None: ...


def data_dir(project: str | Path | None = None) -> Path:
    """`$LOOPWRIGHT_HOME`, else `<project>/.loopwright` (the current directory by default)."""
    home = os.environ.get("LOOPWRIGHT_HOME")
    if home:
        return Path(home)
    return Path(project or ".") / ".loopwright"


def open_store(path: str | Path | None = None) -> Store:
    """The SQLite store at `path` (a file), or in the data directory."""
    from .sqlite import SQLiteStore

    return SQLiteStore(Path(path) if path else data_dir() / "loopwright.db")


from .log import EventLog, SessionKey, open_log  # noqa: E402 (log.py reads the records above)

__all__ = [
    "Claim",
    "EventLog",
    "PendingRecord",
    "PendingStatus",
    "SessionKey",
    "SessionRecord",
    "SessionStatus",
    "StaleWriter",
    "Store",
    "StoreError",
    "StoredEvent",
    "data_dir",
    "open_log",
    "open_store",
]
