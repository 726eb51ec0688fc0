"""The SQL both event logs share: a small dialect (SQLite's, PostgreSQL's) and what is written once
over it — the rows an append derives (`derived_rows`) and every statement the read models
(`read_models`) and the outbox (`sql_outbox`) run.

A statement is written in SQLite's words — `?` marks, and the log's tables in braces
(`{sessions}`: `sessions` on SQLite, `loopwright_sessions` on PostgreSQL) — with the few words
that differ in braces too (`{bigint}`, `{lock}`, ...: `Dialect`); a dialect renders it
(`d(text)`), the statements of the append path once, at import.

A job of several statements is written once as a *program*: a generator that yields each
statement (`Rows`: its rows are sent back; `Do`: run for its effect) and returns the job's
value. Each backend drives a program on its own connection — SQLite's on the log's worker
thread (`sqlite_rows.run`), PostgreSQL's on a pooled connection, awaiting each statement
(`pg_rows.run`) — so locking, transactions and wake-ups stay the backend's own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from .. import redact
from ..errors import UnknownSession
from .derive import DecidePending, NewPending, NewUsage, Op, SetCallId
from .records import SessionKey

T = TypeVar("T")
TABLES = (
    "sessions",
    "events",
    "pending",
    "usage",
    "snapshots",
    "controls",
    "outbox",
    "deliveries",
    "delivery_attempts",
    "notify_targets",
    "notify_keys",
    "attachments",
)
PG_NOW = "extract(epoch FROM clock_timestamp())::float8"
"""PostgreSQL's clock, Unix seconds."""


@dataclass(frozen=True, slots=True)
class Rows:
    """A statement whose rows the program reads (sent back as a list of tuples)."""

    text: str
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Do:
    """A statement run for its effect; `many`: once for each parameters in `params`."""

    text: str
    params: Sequence[Any] = ()
    many: bool = False


Program = Generator[Rows | Do, Any, T]
Now = Callable[[Any], float]
"""A log's clock, given the database's (a row's `{now}`: PostgreSQL's clock, None on SQLite)."""


class Dialect:
    """What differs between SQLite and PostgreSQL in the statements both run."""

    def __init__(self, *, postgres: bool) -> None:
        self.postgres = postgres
        prefix = "loopwright_" if postgres else ""
        self.words = {table: prefix + table for table in TABLES} | (
            {
                "bigint": "::bigint",  # (a sum of bigints is a numeric on PostgreSQL)
                "now": PG_NOW,
                "n": "n",  # pending items in request order
                "lock": " FOR UPDATE",
                "skip_locked": " FOR UPDATE OF d SKIP LOCKED",
                "greatest": "greatest",
                "bytes": ' COLLATE "C"',  # text compared byte by byte, as SQLite does
                "in_texts": "= ANY(?)",
            }
            if postgres
            else {
                "bigint": "",
                "now": "NULL",
                "n": "rowid",
                "lock": "",
                "skip_locked": "",
                "greatest": "max",
                "bytes": "",
                "in_texts": "IN (SELECT value FROM json_each(?))",
            }
        )
        self.unlimited: int | None = None if postgres else -1
        """A LIMIT's parameter for no limit."""
        d = self
        self.insert_events = d("INSERT INTO {events} VALUES (?, ?, ?, ?, ?)")
        self.advance = d(
            "UPDATE {sessions} SET last_seq = ?, last_reply_seq = ?, status = ?, updated_at = ? "
            "WHERE id = ?"
        )
        self.new_pending = d(
            "INSERT INTO {pending} (id, session, tenant, kind, call_id, tool, args, scope, "
            "reason, requested_at, batch_seq, status) "
            "VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, 'open')"
        )
        self.notice = d("INSERT INTO {outbox} (tenant, item, event, at) VALUES (?, ?, ?, ?)")
        """An item became pending or was resolved: the notifications' outbox (`store.outbox`)
        gets a row in the same transaction, so a crash after the commit cannot lose them."""
        self.set_call_id = d(
            "UPDATE {pending} SET call_id = ?, tool = coalesce(?, tool) "
            "WHERE id = ? AND session = ?"
        )
        decide = (
            "UPDATE {pending} SET status = ?, decided_by = ?, decided_at = ?, edited_args = ?, "
            "answer = ?, note = ? WHERE id = ? AND session = ? AND status = 'open'"
        )
        # an item decided already stays as it is, with no notice: on PostgreSQL one statement
        # (no round trip in a pipeline), on SQLite the notice follows only a change
        self.decide = d(
            f"WITH decided AS ({decide} RETURNING id) INSERT INTO {{outbox}} "
            "(tenant, item, event, at) SELECT ?, id, 'resolved', ? FROM decided"
            if postgres
            else decide
        )
        self.resolved = d(
            "INSERT INTO {outbox} (tenant, item, event, at) "
            "SELECT ?, ?, 'resolved', ? WHERE changes() = 1"
        )
        self.new_usage = d("INSERT INTO {usage} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        self.insert_blob = d(
            "INSERT INTO {attachments} VALUES (?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING"
        )
        self.take_over = d(
            "UPDATE {sessions} SET status = 'running', epoch = ?, owner = ?, lease_expires = ?, "
            "updated_at = ? WHERE id = ?"
        )
        self.renew = d("UPDATE {sessions} SET lease_expires = ? WHERE id = ?")
        self.release = d(
            "UPDATE {sessions} SET status = ?, owner = NULL, lease_expires = NULL, "
            "updated_at = ? WHERE id = ?"
        )
        self.save_snapshot = d(
            "INSERT INTO {snapshots} VALUES (?, ?, ?, ?) ON CONFLICT (session) DO UPDATE "
            "SET seq = excluded.seq, data = excluded.data, at = excluded.at "
            "WHERE excluded.seq >= {snapshots}.seq"
        )

        # controls (`sqlite_controls`, `pg_controls`): sent, then taken or withdrawn
        self.send_control = d(
            "INSERT INTO {controls} (session, epoch, kind, text, state, sent_at) "
            "VALUES (?, ?, ?, ?, 'sent', ?) RETURNING id"
        )
        self.take_controls = d(
            "UPDATE {controls} SET state = 'taken', handled_at = ? "
            "WHERE session = ? AND epoch = ? AND state = 'sent' RETURNING id, kind, text"
        )
        self.control_outcome = d(
            "SELECT c.state, s.epoch, s.owner, s.lease_expires, {now} FROM {controls} c "
            "JOIN {sessions} s ON s.id = c.session WHERE c.id = ?"
        )
        self.withdraw_control = d(
            "UPDATE {controls} SET state = 'withdrawn', handled_at = ? "
            "WHERE id = ? AND state = 'sent'"
        )
        self.control_state = d("SELECT state FROM {controls} WHERE id = ?")

    def __call__(self, text: str) -> str:
        """`text` (SQLite's words, tables and dialect words in braces) in this dialect."""
        text = text.format_map(self.words)
        return text.replace("?", "%s") if self.postgres else text

    def texts(self, values: Collection[str]) -> Any:
        """The parameter of `{in_texts}` for `values`."""
        return list(values) if self.postgres else json.dumps(list(values))


SQLITE = Dialect(postgres=False)
POSTGRES = Dialect(postgres=True)


def derived_rows(d: Dialect, ops: Sequence[Op], sid: int, tenant: str, at: str) -> list[Do]:
    """The statements that write what an append derives (`derive`), in order."""
    done: list[Do] = []
    for op in ops:
        match op:
            case NewPending():
                row = (
                    op.id,
                    sid,
                    tenant,
                    op.kind,
                    op.tool,
                    json.dumps(redact.deep(op.args)),
                    None if op.scope is None else json.dumps(op.scope),
                    redact.deep(op.reason),
                    op.requested_at,
                    op.batch_seq,
                )
                done += (Do(d.new_pending, row), Do(d.notice, (tenant, op.id, "pending", at)))
            case SetCallId():
                done.append(Do(d.set_call_id, (op.call_id, op.tool, op.id, sid)))
            case DecidePending():
                decided = (
                    op.status,
                    op.by,
                    op.decided_at,
                    None if op.edited_args is None else json.dumps(redact.deep(op.edited_args)),
                    redact.deep(op.answer),
                    redact.deep(op.note),
                    op.id,
                    sid,
                )
                if d.postgres:
                    done.append(Do(d.decide, (*decided, tenant, at)))
                else:
                    done += (Do(d.decide, decided), Do(d.resolved, (tenant, op.id, at)))
            case NewUsage():
                usage = (
                    sid,
                    op.seq,
                    tenant,
                    op.model,
                    op.input_tokens,
                    op.output_tokens,
                    op.cache_read_tokens,
                    op.cache_write_tokens,
                    op.cost,
                    at,
                )
                done.append(Do(d.new_usage, usage))
    return done


def astuple(key: SessionKey) -> tuple[str, str, str]:
    return key.tenant, key.agent, key.id


def unknown(key: SessionKey) -> UnknownSession:
    return UnknownSession(f"no session {key.id!r}")


def iso(t: float) -> str:
    """`t` (Unix seconds) as ISO 8601 in UTC to the millisecond, `2026-12-02T04:39:00.123Z`:
    `datetime`'s (rounded to the microsecond, half to even, then cut), with the seconds' part
    kept from the last call (a commit's time costs a twentieth of `datetime`'s)."""
    if not 0 <= t < _LAST_SECOND:
        return _iso(t)
    second = int(t)
    micro = round((t - second) * 1e6)  # (as `datetime.fromtimestamp` rounds)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    return f"{_whole_second(second)}.{micro // 1000:03d}Z"


@functools.lru_cache(maxsize=2)
def _whole_second(second: int) -> str:
    """A whole second's text up to the seconds (kept for the calls within that second)."""
    return _iso(second)[:19]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_LAST_SECOND = 253402300799.0  # (9999-12-31T23:59:59Z: past it, `datetime` says why not)
