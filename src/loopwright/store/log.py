"""The store's seams: where sessions live, as async interfaces a backend implements.

A session is one append-only log of events, named by (tenant, agent, id): the same id under
another agent or tenant is another session, and a foreign id is indistinguishable from an unused
one. Everything else a backend keeps — the session's status, its pending items and who decided
them, usage rows, a subagent session's parent — is *derived* from the events by
`store.derive` (backend-neutral code) inside the transaction that appends them, so two backends
cannot disagree about what a log means.

Writers hold a **lease**: a run claims its session for `ttl` seconds and renews the lease by
heartbeat while it lives. A lease that expired may be taken over by anyone, from any machine
(there is no host or pid liveness): the takeover bumps the session's epoch, and every later append
or renewal of the old lease is refused with `StaleWriter` inside the backend's transaction.

Decisions on pending items are not writes of the run: `decide` appends a `pending:decided` event
to the item's session whoever holds its lease (the run may be waiting on a live approver), and is
single-use — the first decision wins, a second one changes nothing and returns the first.

**Controls** reach a run wherever it executes: `send_control` records a cancel, a steer or a
follow-up for the run that holds the session *now*, addressed to its lease's epoch; that run
takes it (`controls`, single-use, in the order sent), in this process or any other. A control
is fenced by that epoch: a run that ended (or lost its lease) first never takes it, nor does any
later run of the session (a later lease has a higher epoch) — `delivered` then withdraws it and
says so, and the sender decides what to do instead (a steer is logged for the session's next
run). Controls are not events: the run logs what it does with one (`steering:queued`, its
cancelled end) as it would for a control of its own process.

    log = await open_log(url)                     # SQLite file by default, or PostgreSQL
    claimed = await log.claim(key, owner, ttl=30)
    seq = await log.append(claimed.lease, [event, ...])
    async for stored in log.follow(key, after=seq): ...

**The seams.** A backend is one `Store` (the five seams and `close`) on one database; each
caller takes the narrowest seam it uses (the `Store` when it uses two; the journal uses all
four). The doors read through the runtime; the notifications' worker, the outbox and an item.

    server, CLI, editor adapter ─────────► Runtime     (runtime.service, runtime.reading)
    runtime.state, lease, follow ────────► EventLog    claim renew release append
                                                       read follow snapshot save_snapshot
    runtime.decisions, approvers ────────► Decisions   decide wait_decided
    runtime.controls, live ──────────────► Controls    send_control controls delivered withdraw
    runtime.reading, decisions; notify ──► ReadModels  session(s) pending(_item) usage(_report)
                                                       attachments
    notify, GET /notifications ──────────► Outbox      (store.outbox, `outbox_of(store)`)
    runtime.forking ─────────────────────► Forks       fork
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..errors import ConfigError
from ..events import Event
from ..wire import dumps_all
from .records import Page as Page
from .records import PendingRecord, PendingStatus, SessionStatus, StoredEvent
from .records import SessionKey as SessionKey

logger = logging.getLogger("loopwright.store")

if TYPE_CHECKING:
    from .usage_report import UsageQuery


MAX_SESSION_ID = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SESSION_ID_RULE = "1-256 characters, none of them a control character"
"""Session ids a client may choose: any text of 1-256 characters but control characters
(loopengine's own demo uses the customer's email), stored and compared as given."""


def valid_session_id(session_id: str) -> bool:
    """Whether `session_id` follows `SESSION_ID_RULE` (the HTTP API and the CLI check it)."""
    return 1 <= len(session_id) <= MAX_SESSION_ID and _CONTROL.search(session_id) is None


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to append to one session until `expires` (the backend's clock, Unix seconds),
    fenced by `epoch`: a takeover bumps the epoch and this lease's appends are refused."""

    key: SessionKey
    owner: str
    epoch: int
    expires: float


@dataclass(frozen=True, slots=True)
class Claimed:
    lease: Lease
    died: bool
    """The previous run ended before its `done` (its lease expired, or it was released as
    `interrupted`): the caller recovers its unfinished batch. A run whose lease expired after
    its `done` was committed did not die."""
    last_seq: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """A human's (or the recovery's) decision on a pending item."""

    status: Literal["approved", "denied", "answered", "skipped"]
    by: str
    edited_args: dict[str, Any] | None = None
    answer: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Decided:
    """What `decide` did: whether this call decided the item, and the item as it now stands
    (the first decision when another one won)."""

    changed: bool
    item: PendingRecord
    outstanding: int
    """Open items left in the item's batch."""


ControlKind = Literal["cancel", "steer", "follow_up"]


@dataclass(frozen=True, slots=True)
class QueuedControl:
    """A cancel, steer or follow-up sent to the run holding `key` under the lease of `epoch`."""

    id: int
    key: SessionKey
    epoch: int
    kind: ControlKind
    text: str | None = None
    """The message of a steer or a follow-up."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A session's state as of `seq`, serialised by the reducer; opening the session reads it
    and the events after it."""

    seq: int
    data: str


class EncodedEvents(list[Event]):
    """Events to append with the JSON of some of them (`wire.dumps`, None for the others),
    encoded by the caller as they came: a backend stores a text given as it is."""

    __slots__ = ("texts",)

    def __init__(self, events: Sequence[Event], texts: list[str | None]) -> None:
        super().__init__(events)
        self.texts = texts


def encoded(events: Sequence[Event]) -> list[str]:
    """The JSON each of `events` is stored as: the text given (`EncodedEvents`) or `wire.dumps`'s."""
    texts = getattr(events, "texts", None)
    if texts is None:
        return dumps_all(events)
    if None not in texts:
        return texts  # type: ignore[no-any-return]
    made = iter(dumps_all([e for e, t in zip(events, texts, strict=True) if t is None]))
    return [next(made) if t is None else t for t in texts]


def _row(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ValueError(f"cursor {text!r} is not one this log gave")
    return int(text)


def session_cursor(cursor: str) -> tuple[int, str]:
    """A sessions page's cursor, `<row>:<updated at>`, as (row, updated at)."""
    row, colon, updated_at = cursor.partition(":")
    if not colon:
        raise ValueError(f"cursor {cursor!r} is not one this log gave")
    return _row(row), updated_at


def pending_cursor(cursor: str) -> int:
    """A pending page's cursor: the row of the last item given."""
    return _row(cursor)


class EventLog(Protocol):
    """A session's log itself: the writer's lease, appends, snapshots, reading and following.
    Every method of every seam is safe to call from many tasks and many processes at once."""

    async def claim(
        self, key: SessionKey, owner: str, *, ttl: float, parent: SessionKey | None = None
    ) -> Claimed:
        """Take the session for one run (an unknown key creates it; `parent`, an existing
        session, records a subagent session's parent). Raises `SessionBusy` while an unexpired
        lease holds it — whoever its owner: one run at a time (the message says until when)."""
        ...

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend the lease (the heartbeat). Raises `StaleWriter` once it was taken over."""
        ...

    async def release(self, lease: Lease, status: SessionStatus) -> None:
        """End the run; the session becomes `status`. Raises `StaleWriter` once the lease was
        taken over (or released already)."""
        ...

    def append(self, lease: Lease, events: Sequence[Event]) -> Awaitable[int]:
        """Commit `events` in order, atomically and durably, with what they derive; returns the
        last sequence number (gapless per session). Raises `StaleWriter`."""
        ...

    async def read(
        self, key: SessionKey, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """Committed events with `seq > after`, in order (at most `limit`). `UnknownSession`."""
        ...

    def follow(self, key: SessionKey, *, after: int) -> AsyncIterator[StoredEvent]:
        """Committed events after `after`, then each new one as it is committed — by this
        process or any other — without gaps, until the caller stops iterating."""
        ...

    async def snapshot(self, key: SessionKey) -> Snapshot | None:
        """The newest snapshot (highest seq), if any. `UnknownSession`."""
        ...

    async def save_snapshot(self, lease: Lease, snapshot: Snapshot) -> None:
        """Keep the session's state as of `snapshot.seq` (only the newest is kept). Raises
        `StaleWriter`."""
        ...


class Decisions(Protocol):
    """The one authority on pending items: a decision by anyone (no lease), waiting for one."""

    async def decide(self, tenant: str, pending_id: str, decision: Verdict) -> Decided:
        """Record a decision as a `pending:decided` event in the item's session, atomically and
        single-use. A denial also skips the batch's other open items (one event each).
        `UnknownPending` for an unknown or foreign id."""
        ...

    async def wait_decided(self, tenant: str, pending_id: str) -> PendingRecord:
        """Return once the item is no longer open (decided here or in another process)."""
        ...


class Controls(Protocol):
    """A cancel, steer or follow-up for the run holding a session, wherever it runs (above)."""

    async def send_control(
        self, key: SessionKey, kind: ControlKind, text: str | None = None
    ) -> QueuedControl | None:
        """Record a control for the run that holds the session now (an unexpired lease),
        addressed to its lease's epoch, and wake that run wherever it is; None when no run
        holds the session. `UnknownSession`."""
        ...

    def controls(self, lease: Lease) -> AsyncIterator[QueuedControl]:
        """The controls sent to the run of `lease`, each taken (single-use) as it comes, from
        this process or any other, in the order sent, until the caller stops. Raises
        `StaleWriter` once the lease was released or taken over (a release by this log ends
        a waiting iteration at once)."""
        ...

    async def delivered(self, control: QueuedControl) -> bool:
        """Wait until the run took the control (True), or can no longer take it — it released
        its lease, lost it, or let it expire — and then withdraw it (False: it is never taken
        afterwards)."""
        ...

    async def withdraw(self, control: QueuedControl) -> bool:
        """Withdraw a control its run has not taken (True: it never will); False when the run
        took it first."""
        ...


class ReadModels(Protocol):
    """What the events derive (`store.read_models`: one SQL text for both backends)."""

    async def session(self, key: SessionKey) -> SessionRecord:
        """`UnknownSession` for an unknown or foreign key."""
        ...

    async def sessions(
        self, tenant: str, agent: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> Page:
        """`SessionRecord`s, most recently updated first."""
        ...

    async def tenants(self) -> list[str]:
        """Every tenant that has a session, sorted (what a project-wide read goes through)."""
        ...

    async def pending(
        self,
        tenant: str,
        *,
        agent: str | None = None,
        session: SessionKey | None = None,
        status: PendingStatus | None = "open",
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        """`PendingRecord`s in the order they were requested (an unknown or foreign `session`
        has none)."""
        ...

    async def pending_item(self, tenant: str, pending_id: str) -> PendingRecord:
        """`UnknownPending` for an unknown or foreign id."""
        ...

    async def usage(self, tenant: str, *, key: SessionKey | None = None) -> dict[str, Any]:
        """Model requests, tokens (input, output, cache read/write) and cost, summed over the
        tenant or one session (`UnknownSession`)."""
        ...

    async def usage_report(self, query: UsageQuery) -> Page:
        """The usage rows of `query.tenant` summed by group (`usage_report`), a page of
        groups at a time; `ValueError` for a cursor this log did not give."""
        ...

    async def attachments(self, hashes: Sequence[str]) -> dict[str, bytes]:
        """The bytes of the attachments stored under `hashes` (those the log has; `blobs`)."""
        ...


class Forks(Protocol):
    """A new session from a seq of another: its log a copy of the other's up to there."""

    async def fork(self, source: SessionKey, at: int, new_id: str) -> SessionKey:
        """Create session `new_id` (the source's tenant and agent) whose log is the source's
        events 1..`at`, its lineage on its row, in one transaction (`store.forking`).
        `UnknownSession`; `CannotFork` for a seq out of range or an id in use."""
        ...


class Store(EventLog, Decisions, Controls, ReadModels, Forks, Protocol):
    """A backend (`SQLiteLog`, `PostgresLog`): every seam on one database; its opener closes it."""

    async def close(self) -> None: ...


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


POOL_SIZE = 10
"""The connections a PostgreSQL log's pool opens at most, unless told (`[store] pool_size`)."""


def pool_size_of(value: object, name: str = "pool_size", *, source: str | None = None) -> int:
    """`value` if it is a positive integer (a pool size), else a `ConfigError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}", source=source)
    return value


@dataclass(frozen=True, slots=True)
class SessionRecord:
    key: SessionKey
    status: SessionStatus
    """`running` while an unexpired lease holds it; `interrupted` once that lease expired
    before the run's `done` (or the run was released so); otherwise as the run ended."""
    last_seq: int
    created_at: str
    updated_at: str
    parent: SessionKey | None = None
    lease_owner: str | None = None
    lease_expires: float | None = None
    forked_from: Lineage | None = None
    """A fork's source: the session (of its tenant and agent) and the seq it was forked at."""
    title: str | None = None
    """Its model-written title, stored once (`store.titles`); None: none (yet)."""


@dataclass(frozen=True, slots=True)
class Lineage:
    session: str
    seq: int
