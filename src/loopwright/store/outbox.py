"""The notifications' outbox: what webhooks are told, kept in the event log's database.

When an item becomes pending, or is resolved, the transaction that commits it also writes a
*notice* (`outbox`: tenant, item id, `pending` or `resolved`; see `sql.Dialect.notice`). A
process that crashes right after that commit loses nothing: whichever process delivers next
finds the notice there.

A delivery worker (`loopwright.notify`) fans each notice out to every configured webhook — a
*delivery* per (notice, target), made once: `expand` — then claims due deliveries (`claim`:
held for a while, so two workers do not post the same one at once; a worker that dies lets the
hold expire and another one posts it again: at-least-once), posts them, and records every
attempt (`record`): delivered, due again later (backoff), or given up. `deliveries` lists them
with their attempts, a page at a time (newest notice first, then by target; the cursor is the
last delivery's `<notice id>:<target>`, its targets compared byte by byte on both backends).

Each target keeps a *floor*: notices at or below it were all fanned out, so `expand` looks only
above it. It moves only over notices older than `SETTLE` seconds: on PostgreSQL, ids are taken
when a transaction inserts, not when it commits, and a notice of a slow transaction may appear
below notices already seen.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal, Protocol, cast

from .log import Page, pending_cursor

NoticeEvent = Literal["pending", "resolved"]
DeliveryState = Literal["due", "delivered", "failed", "skipped"]
SETTLE = 60.0
"""Seconds after which a notice is taken to be committed or never to be (see the docstring)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """An item of `tenant` became pending, or was resolved, at `at`."""

    id: int
    tenant: str
    item: str
    event: NoticeEvent
    at: str


@dataclass(frozen=True, slots=True)
class Attempt:
    n: int
    at: str
    status: int | None
    """The receiver's HTTP status; None when no answer came (`error` says why)."""
    error: str | None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notice for one target, and how its delivery goes."""

    id: str
    """The delivery id the body carries (receivers drop duplicates by it)."""
    notice: Notice
    target: str
    state: DeliveryState
    attempts: int
    due: float
    """When it is next tried (Unix seconds)."""
    last_status: int | None = None
    last_error: str | None = None
    created_at: str = ""
    delivered_at: str | None = None
    tried: list[Attempt] = field(default_factory=list)
    """The attempts, oldest first (filled by `deliveries`)."""


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """What an attempt came to: `state` is `delivered`, `due` (again at `due`) or `failed`;
    `skipped`: not sent after all (the target does not take this kind), and no attempt."""

    state: Literal["delivered", "due", "failed", "skipped"]
    at: str
    status: int | None = None
    error: str | None = None
    due: float = 0.0


class Outbox(Protocol):
    """The outbox on one event log's database (`outbox_of`)."""

    async def expand(
        self, target: str, events: Collection[str], now: float, *, max_age: float
    ) -> int:
        """Make a delivery for `target` of every notice not yet fanned out to it: `due` now when
        its event is in `events` and it is at most `max_age` seconds old, else `skipped`.
        Returns how many are due."""
        ...

    async def claim(
        self, targets: Collection[str], now: float, *, hold: float, owner: str, limit: int = 20
    ) -> list[Delivery]:
        """Take due deliveries to `targets` (due at `now`, not held by another worker) and hold
        them for `hold` seconds."""
        ...

    async def record(self, delivery: Delivery, outcome: AttemptOutcome) -> None:
        """Log an attempt and move the delivery on (`outcome`)."""
        ...

    async def deliveries(
        self,
        tenant: str | None = None,
        *,
        item: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        """A page of `Delivery`s (not the skipped ones) with their attempts, newest first;
        `ValueError` for a cursor this outbox did not give (`delivery_cursor`)."""
        ...

    async def next_due(self, targets: Collection[str]) -> float | None:
        """When the next due delivery to `targets` is due, if any."""
        ...

    async def notices(self) -> tuple[int, int]:
        """How many notices there are and the highest id: when neither moved, there is nothing
        new to fan out (a cheap read instead of a write per look)."""
        ...

    async def expire(self, before: str, error: str, now: float) -> int:
        """Give up the deliveries still due that were made before `before` (an ISO time) and
        that no worker holds at `now`: `failed`, with `error` (no attempt). Returns how many."""
        ...

    async def prune(self, before: str) -> int:
        """Forget what is done with: deliveries delivered, failed or skipped that were made
        before `before` (an ISO time) with their attempts, and notices from before it that
        have no delivery still due. Returns how many deliveries went."""
        ...

    async def key(self, name: str, new: str) -> str:
        """The key stored as `name`, storing `new` first when there is none (all processes on
        the database agree on it)."""
        ...


def delivery_cursor(cursor: str) -> tuple[int, str]:
    """A deliveries page's cursor, `<notice id>:<target>`, as (notice id, target)."""
    notice, colon, target = cursor.partition(":")
    if not colon:
        raise ValueError(f"cursor {cursor!r} is not one this outbox gave")
    return pending_cursor(notice), target


def outbox_of(log: object) -> Outbox:
    """The outbox of an event log (`SQLiteLog` or `PostgresLog`: `sql_outbox`, its `outbox()`)."""
    outbox = getattr(log, "outbox", None)
    if outbox is None:
        raise TypeError(f"no outbox for {type(log).__name__}")
    return cast(Outbox, outbox())
