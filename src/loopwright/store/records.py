"""The records read from a log (`StoredEvent`, `PendingRecord`), the store's errors
(`StoreError`, `StaleWriter`) and where it lives (`data_dir`): the values every backend and
every reader share, below them all (`loopwright.store` names them)."""

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


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A session's name: ids are unique per (tenant, agent), never globally."""

    tenant: str
    agent: str
    id: str


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing; `cursor` fetches the next one (None at the end). A cursor the
    log did not give is refused with `ValueError` (`session_cursor`, `pending_cursor`)."""

    items: list[Any]
    cursor: str | None
