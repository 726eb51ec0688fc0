"""The SQLite store: one database file, WAL mode, a schema version with migrations.

Every write is one `BEGIN IMMEDIATE` transaction, so appends from several processes serialise on
SQLite's write lock and sequence numbers stay gapless. `synchronous=NORMAL` (the default) keeps
committed events across a process crash; `durability="full"` also survives power loss, at the
cost of an fsync per commit.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from .. import events as ev
from ..errors import SessionBusy, UnknownPending, UnknownSession
from ..wire import dumps, loads
from . import (
    Claim,
    PendingRecord,
    PendingStatus,
    SessionRecord,
    SessionStatus,
    StaleWriter,
    StoredEvent,
    StoreError,
)

APPLICATION_ID = 0x4C575254  # "LWRT"


def _v1(db: sqlite3.Connection) -> None:
    _run_script(
        db,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent TEXT NOT NULL,
            status TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
            last_reply_seq INTEGER NOT NULL DEFAULT 0, epoch INTEGER NOT NULL DEFAULT 0,
            owner TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
        CREATE INDEX sessions_by_tenant ON sessions (tenant, agent, updated_at);
        CREATE TABLE events (
            session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
            data TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
        CREATE TABLE pending (
            id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tenant TEXT NOT NULL,
            agent TEXT NOT NULL, kind TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
            args TEXT NOT NULL, reason TEXT NOT NULL, requested_at TEXT NOT NULL,
            batch_seq INTEGER NOT NULL, status TEXT NOT NULL, decided_by TEXT,
            decided_at TEXT, edited_args TEXT, answer TEXT, note TEXT);
        CREATE INDEX pending_by_tenant ON pending (tenant, status, agent, session_id);
        CREATE INDEX pending_by_batch ON pending (session_id, batch_seq);
        CREATE TABLE usage (
            session_id TEXT NOT NULL, seq INTEGER NOT NULL, tenant TEXT NOT NULL,
            agent TEXT NOT NULL, model TEXT, input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL, cost REAL, at TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
        """,
    )


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Statements one by one, inside the caller's transaction (`executescript` would commit)."""
    for statement in filter(None, (part.strip() for part in script.split(";"))):
        db.execute(statement)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1]
"""Schema version N is reached by applying MIGRATIONS[N-1]; append, never edit."""


class SQLiteStore:
    """The default store: one SQLite file (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: Literal["normal", "full"] = "normal",
        busy_timeout: float = 5.0,
        max_page_count: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(
                self.path, isolation_level=None, timeout=busy_timeout, check_same_thread=False
            )
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            self.db.execute("PRAGMA foreign_keys=ON")
            if max_page_count is not None:
                self.db.execute(f"PRAGMA max_page_count={int(max_page_count)}")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable loopwright database ({exc})") from None

    # ---- schema ---------------------------------------------------------------------------

    def _migrate(self) -> None:
        db = self.db
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
        if app not in (0, APPLICATION_ID) or (app == 0 and tables):
            raise StoreError(f"{self.path}: this database belongs to another application")
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this "
                f"loopwright knows ({len(MIGRATIONS)}); upgrade loopwright"
            )
        with self._write():
            for number in range(version, len(MIGRATIONS)):
                MIGRATIONS[number](db)
                db.execute(f"PRAGMA user_version={number + 1}")
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; SQLite errors become `StoreError`s with a clear message."""
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            hint = " (another process holds the write lock)" if "locked" in str(exc) else ""
            raise StoreError(f"{self.path}: {exc}{hint}") from None
        try:
            yield db
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreError(f"{self.path}: {exc}") from None
            raise

    # ---- sessions and claims ------------------------------------------------------------------

    def claim(self, session_id: str, tenant: str, agent: str, owner: str) -> tuple[Claim, bool]:
        now = _now()
        with self._write() as db:
            row = db.execute(
                "SELECT tenant, status, owner, epoch FROM sessions WHERE id=?", (session_id,)
            ).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO sessions (id, tenant, agent, status, epoch, owner, "
                    "created_at, updated_at) VALUES (?, ?, ?, 'running', 1, ?, ?, ?)",
                    (session_id, tenant, agent, owner, now, now),
                )
                return Claim(session_id, 1, owner), False
            if row[0] != tenant:
                raise UnknownSession(f"no session {session_id!r}")
            status, holder, epoch = row[1], row[2], row[3]
            if status == "running" and _alive(holder):
                raise SessionBusy(f"session {session_id} is running in another run ({holder})")
            died = status in ("running", "interrupted")
            db.execute(
                "UPDATE sessions SET status='running', epoch=?, owner=?, updated_at=? WHERE id=?",
                (epoch + 1, owner, now, session_id),
            )
            return Claim(session_id, epoch + 1, owner), died

    def release(self, claim: Claim, status: SessionStatus) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE sessions SET status=?, owner=NULL, updated_at=? WHERE id=? AND epoch=?",
                (status, _now(), claim.session_id, claim.epoch),
            )

    def append(self, claim: Claim, events: Sequence[ev.Event]) -> int:
        now = _now()
        sid = claim.session_id
        reply_at = 0  # 1-based position of a reply in this batch: its seq is last_seq + reply_at
        for position, event in enumerate(events, start=1):
            if type(event) is ev.MessageCompleted:
                reply_at = position
        with self._write() as db:
            row = db.execute(
                "UPDATE sessions SET last_seq=last_seq+?, updated_at=?, last_reply_seq="
                "CASE WHEN ? > 0 THEN last_seq+? ELSE last_reply_seq END WHERE id=? AND epoch=? "
                "RETURNING last_seq, last_reply_seq, tenant, agent",
                (len(events), now, reply_at, reply_at, sid, claim.epoch),
            ).fetchone()
            if row is None:
                raise StaleWriter(
                    f"session {sid}: this run's claim (epoch {claim.epoch}) was "
                    "taken over by another run"
                )
            last, reply_seq, tenant, agent = row
            first = last - len(events) + 1
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                [(sid, seq, e.type, dumps(e), now) for seq, e in enumerate(events, start=first)],
            )
            for seq, event in enumerate(events, start=first):
                if isinstance(event, ev.MessageCompleted):
                    self._usage(db, sid, seq, tenant, agent, event.message, now)
                elif isinstance(event, ev.ApprovalPending):
                    db.execute(
                        "INSERT INTO pending (id, session_id, tenant, agent, kind, call_id, tool, "
                        "args, reason, requested_at, batch_seq, status) VALUES "
                        "(?, ?, ?, ?, 'approval', '', ?, ?, ?, ?, ?, 'open')",
                        (
                            event.id,
                            sid,
                            tenant,
                            agent,
                            event.tool,
                            json.dumps(event.args),
                            event.reason,
                            event.requested_at,
                            reply_seq,
                        ),
                    )
                elif isinstance(event, ev.QuestionPending):
                    db.execute(
                        "INSERT INTO pending (id, session_id, tenant, agent, kind, call_id, tool, "
                        "args, reason, requested_at, batch_seq, status) VALUES "
                        "(?, ?, ?, ?, 'question', '', 'ask_user', ?, ?, ?, ?, 'open')",
                        (
                            event.id,
                            sid,
                            tenant,
                            agent,
                            json.dumps({"question": event.question, "options": event.options}),
                            event.question,
                            event.requested_at,
                            reply_seq,
                        ),
                    )
                elif isinstance(event, ev.QuestionResolved):
                    db.execute(
                        "UPDATE pending SET status='answered', decided_by=?, decided_at=?, "
                        "answer=? WHERE id=? AND status='open'",
                        (event.by, event.resolved_at, event.answer, event.id),
                    )
                elif isinstance(event, ev.PendingRequested):
                    db.execute("UPDATE pending SET call_id=? WHERE id=?", (event.call_id, event.id))
                elif isinstance(event, ev.ApprovalResolved):
                    status = "approved" if event.decision == "approve" else "denied"
                    db.execute(
                        "UPDATE pending SET status=?, decided_by=?, decided_at=?, edited_args=?, "
                        "note=? WHERE id=? AND status='open'",
                        (
                            status,
                            event.by,
                            event.resolved_at,
                            None if event.args is None else json.dumps(event.args),
                            event.reason,
                            event.id,
                        ),
                    )
            return int(last)

    @staticmethod
    def _usage(
        db: sqlite3.Connection, sid: str, seq: int, tenant: str, agent: str, message: Any, now: str
    ) -> None:
        usage = message.usage
        if usage is None:
            return
        db.execute(
            "INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                seq,
                tenant,
                agent,
                message.model,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.cost,
                now,
            ),
        )

    def load(self, session_id: str, tenant: str, *, after: int = 0) -> list[StoredEvent]:
        self.session(session_id, tenant)
        rows = self.db.execute(
            "SELECT seq, data, at FROM events WHERE session_id=? AND seq>? ORDER BY seq",
            (session_id, after),
        ).fetchall()
        return [StoredEvent(seq, loads(data), at) for seq, data, at in rows]

    def session(self, session_id: str, tenant: str) -> SessionRecord:
        row = self.db.execute(
            "SELECT id, tenant, agent, status, last_seq, created_at, updated_at, owner "
            "FROM sessions WHERE id=? AND tenant=?",
            (session_id, tenant),
        ).fetchone()
        if row is None:
            raise UnknownSession(f"no session {session_id!r}")
        status = row[3]
        if status == "running" and not _alive(row[7]):
            status = "interrupted"
        return SessionRecord(row[0], row[1], row[2], status, row[4], row[5], row[6])

    def sessions(self, tenant: str, agent: str | None = None) -> list[SessionRecord]:
        rows = self.db.execute(
            "SELECT id FROM sessions WHERE tenant=? AND (? IS NULL OR agent=?) "
            "ORDER BY updated_at DESC",
            (tenant, agent, agent),
        ).fetchall()
        return [self.session(r[0], tenant) for r in rows]

    def usage_totals(self, tenant: str, *, session_id: str | None = None) -> dict[str, Any]:
        """Tokens and cost per tenant (or one session)."""
        row = self.db.execute(
            "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
            "coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0), sum(cost) "
            "FROM usage WHERE tenant=? AND (? IS NULL OR session_id=?)",
            (tenant, session_id, session_id),
        ).fetchone()
        keys = (
            "requests",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost",
        )
        return dict(zip(keys, row, strict=True))

    # ---- pending items ----------------------------------------------------------------------

    def pending(
        self,
        tenant: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        status: PendingStatus | None = "open",
    ) -> list[PendingRecord]:
        rows = self.db.execute(
            f"SELECT {_PENDING} FROM pending WHERE tenant=? AND (? IS NULL OR agent=?) "
            "AND (? IS NULL OR session_id=?) AND (? IS NULL OR status=?) ORDER BY rowid",
            (tenant, agent, agent, session_id, session_id, status, status),
        ).fetchall()
        return [_pending(row) for row in rows]

    def pending_item(self, pending_id: str, tenant: str) -> PendingRecord:
        row = self.db.execute(
            f"SELECT {_PENDING} FROM pending WHERE id=? AND tenant=?", (pending_id, tenant)
        ).fetchone()
        if row is None:
            raise UnknownPending(f"no pending item {pending_id!r}")
        return _pending(row)

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
        with self._write() as db:
            item = db.execute(
                "SELECT session_id, batch_seq, status FROM pending WHERE id=? AND tenant=?",
                (pending_id, tenant),
            ).fetchone()
            if item is None:
                raise UnknownPending(f"no pending item {pending_id!r}")
            session_id, batch, current = item
            changed = current == "open"
            if changed:
                db.execute(
                    "UPDATE pending SET status=?, decided_by=?, decided_at=?, edited_args=?, "
                    "answer=?, note=? WHERE id=?",
                    (
                        status,
                        by,
                        _now(),
                        None if edited_args is None else json.dumps(edited_args),
                        answer,
                        note,
                        pending_id,
                    ),
                )
                if status == "denied":  # a denial closes the batch at once
                    db.execute(
                        "UPDATE pending SET status='skipped', decided_by=?, decided_at=? "
                        "WHERE session_id=? AND batch_seq=? AND status='open'",
                        (f"closed by {pending_id}", _now(), session_id, batch),
                    )
            still_open = db.execute(
                "SELECT count(*) FROM pending WHERE session_id=? AND batch_seq=? AND status='open'",
                (session_id, batch),
            )
            return changed, int(still_open.fetchone()[0])

    def close(self) -> None:
        self.db.close()


_PENDING = (
    "id, session_id, tenant, agent, kind, call_id, tool, args, reason, requested_at, "
    "batch_seq, status, decided_by, decided_at, edited_args, answer, note"
)


def _pending(row: tuple[Any, ...]) -> PendingRecord:
    record = PendingRecord(*row)
    return replace(
        record,
        args=json.loads(record.args),  # type: ignore[arg-type]
        edited_args=None if row[14] is None else json.loads(row[14]),
    )


def process_identity(pid: int) -> str:
    """`host:boot:pid:start`: unique to one process even across reboots and pid reuse."""
    return f"{socket.gethostname()}:{_boot_id()}:{pid}:{_start_time(pid)}"


def _alive(owner: str | None) -> bool:
    """Whether the process that holds a claim still runs. On this machine that is checked (same
    boot, same pid, same start time); a claim from another machine is assumed alive."""
    if not owner:
        return False
    if owner == _this_process(os.getpid()):
        return True
    host, boot, pid, start = [*owner.split(":"), "", "", ""][:4]
    if host != socket.gethostname():
        return True
    if boot != _boot_id() or not pid.isdigit():
        return False  # the machine restarted since (power loss, reboot)
    return _start_time(int(pid)) == start != ""


@functools.cache
def _this_process(pid: int) -> str:
    """This process's identity, computed once (per pid: a forked child is another process)."""
    return process_identity(pid)


@functools.cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace(":", "")
    except OSError:
        return "unknown-boot"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' when it does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return ""
        except PermissionError:
            return "unknown"
        return "unknown"
    return stat.rpartition(")")[2].split()[19]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
