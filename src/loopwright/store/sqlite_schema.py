"""The SQLite event log's schema and its migrations.

Version 1 is the schema the synchronous `SQLiteStore` wrote (session ids global, claims by
process identity). Version 2 is the event log's: sessions named by (tenant, agent, id) with an
integer key the other tables use, leases with an expiry, a subagent session's parent, snapshots.
Version 3 adds the controls sent to a session's run from another process (`controls`: addressed
to the lease's epoch, `sent`, then `taken` by the run or `withdrawn` by the sender).
Version 4 adds the notifications' outbox (`outbox`: a row per item that became pending or was
resolved, written in the transaction that committed it), their deliveries to each webhook, every
attempt, each webhook's cursor and the keys notifications sign with (`store.outbox`).
Version 5 adds the attachments' bytes, one row per SHA-256 (`store.blobs`).
Version 6 adds a fork's lineage to its session's row: the session and seq it was forked from
(`store.forking`).
Version 7 adds a session's title, written once by a model when titles are configured
(`store.titles`).
A database is opened only when it is empty or ours (`application_id`), and not newer than this
code knows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from .blobs import SQLITE_TABLE
from .records import StoreError

APPLICATION_ID = 0x4C575254  # "LWRT"


def _v1(db: sqlite3.Connection) -> None:
    """Today's `SQLiteStore` schema, as it wrote it (kept here so the log stands alone)."""
    _script(
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


def _v2(db: sqlite3.Connection) -> None:
    """Sessions keyed by (tenant, agent, name); v1's rows move over. A v1 session left running
    gets an expired lease (there is no telling whether its process lives): it reads as
    interrupted and the next claim recovers it."""
    for table in ("sessions", "events", "pending", "usage"):
        db.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
    for index in ("sessions_by_tenant", "pending_by_tenant", "pending_by_batch"):
        db.execute(f"DROP INDEX {index}")
    _script(
        db,
        """
        CREATE TABLE sessions (
            id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, agent TEXT NOT NULL,
            name TEXT NOT NULL, parent INTEGER REFERENCES sessions (id),
            status TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
            last_reply_seq INTEGER NOT NULL DEFAULT 0, epoch INTEGER NOT NULL DEFAULT 0,
            owner TEXT, lease_expires REAL,
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            UNIQUE (tenant, agent, name));
        CREATE TABLE events (
            session INTEGER NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
            data TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
        CREATE TABLE pending (
            id TEXT PRIMARY KEY, session INTEGER NOT NULL, tenant TEXT NOT NULL,
            kind TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
            args TEXT NOT NULL, scope TEXT, reason TEXT NOT NULL, requested_at TEXT NOT NULL,
            batch_seq INTEGER NOT NULL, status TEXT NOT NULL, decided_by TEXT,
            decided_at TEXT, edited_args TEXT, answer TEXT, note TEXT);
        CREATE INDEX pending_by_status ON pending (tenant, status);
        CREATE INDEX pending_in_batch ON pending (session, batch_seq);
        CREATE TABLE usage (
            session INTEGER NOT NULL, seq INTEGER NOT NULL, tenant TEXT NOT NULL,
            model TEXT, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,
            cost REAL, at TEXT NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
        CREATE INDEX usage_by_tenant ON usage (tenant);
        CREATE TABLE snapshots (
            session INTEGER PRIMARY KEY, seq INTEGER NOT NULL, data TEXT NOT NULL,
            at TEXT NOT NULL);

        INSERT INTO sessions (tenant, agent, name, status, last_seq, last_reply_seq, epoch,
            owner, lease_expires, created_at, updated_at)
        SELECT tenant, agent, id, status, last_seq, last_reply_seq, epoch, owner,
            CASE WHEN status = 'running' THEN 0 END, created_at, updated_at
        FROM v1_sessions ORDER BY rowid;
        INSERT INTO events SELECT s.id, e.seq, e.type, e.data, e.at
        FROM v1_events e JOIN sessions s ON s.name = e.session_id;
        INSERT INTO pending SELECT p.id, s.id, p.tenant, p.kind, p.call_id, p.tool, p.args,
            NULL, p.reason, p.requested_at, p.batch_seq, p.status, p.decided_by,
            p.decided_at, p.edited_args, p.answer, p.note
        FROM v1_pending p JOIN sessions s ON s.name = p.session_id ORDER BY p.rowid;
        INSERT INTO usage SELECT s.id, u.seq, u.tenant, u.model, u.input_tokens,
            u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost, u.at
        FROM v1_usage u JOIN sessions s ON s.name = u.session_id;
        DROP TABLE v1_sessions; DROP TABLE v1_events; DROP TABLE v1_pending; DROP TABLE v1_usage
        """,
    )
    # v1 named a subagent's session `<parent>/<subagent>/<call id>`; the parent is a column now
    names = dict(db.execute("SELECT name, id FROM sessions WHERE name LIKE '%/%/%'").fetchall())
    for name, key in names.items():
        parent = db.execute(
            "SELECT id FROM sessions WHERE name = ? AND tenant = "
            "(SELECT tenant FROM sessions WHERE id = ?)",
            (name.rsplit("/", 2)[0], key),
        ).fetchone()
        if parent is not None:
            db.execute("UPDATE sessions SET parent = ? WHERE id = ?", (parent[0], key))


def _v3(db: sqlite3.Connection) -> None:
    """Controls (cancel, steer, follow-up) for the run holding a session, kept once handled."""
    _script(
        db,
        """
        CREATE TABLE controls (
            id INTEGER PRIMARY KEY, session INTEGER NOT NULL, epoch INTEGER NOT NULL,
            kind TEXT NOT NULL, text TEXT, state TEXT NOT NULL, sent_at TEXT NOT NULL,
            handled_at TEXT);
        CREATE INDEX controls_to_run ON controls (session, epoch, state)
        """,
    )


def _v4(db: sqlite3.Connection) -> None:
    """The notifications' outbox, deliveries and their attempts (`store.outbox`)."""
    _script(db, OUTBOX)


OUTBOX = """
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, item TEXT NOT NULL, event TEXT NOT NULL,
    at TEXT NOT NULL);
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY, notice INTEGER NOT NULL, target TEXT NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, due REAL NOT NULL, held_until REAL, held_by TEXT,
    last_status INTEGER, last_error TEXT, created_at TEXT NOT NULL, delivered_at TEXT,
    UNIQUE (notice, target));
CREATE INDEX deliveries_due ON deliveries (state, due);
CREATE TABLE delivery_attempts (
    delivery TEXT NOT NULL, n INTEGER NOT NULL, at TEXT NOT NULL, status INTEGER, error TEXT,
    PRIMARY KEY (delivery, n)) WITHOUT ROWID;
CREATE TABLE notify_targets (target TEXT PRIMARY KEY, floor INTEGER NOT NULL);
CREATE TABLE notify_keys (name TEXT PRIMARY KEY, value TEXT NOT NULL)
"""


def _v5(db: sqlite3.Connection) -> None:
    """Attachments' bytes by hash (`store.blobs`)."""
    _script(db, SQLITE_TABLE)


def _v6(db: sqlite3.Connection) -> None:
    """A fork's lineage (`store.forking`)."""
    _script(db, FORKS)


FORKS = """
ALTER TABLE sessions ADD COLUMN forked_from INTEGER REFERENCES sessions (id);
ALTER TABLE sessions ADD COLUMN forked_at INTEGER
"""


def _v7(db: sqlite3.Connection) -> None:
    """A session's model-written title (`store.titles`)."""
    db.execute(TITLES)


TITLES = "ALTER TABLE sessions ADD COLUMN title TEXT"


def _script(db: sqlite3.Connection, script: str) -> None:
    """Statements one by one, inside the caller's transaction (`executescript` would commit)."""
    for statement in filter(None, (part.strip() for part in script.split(";"))):
        db.execute(statement)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
"""Schema version N is reached by applying MIGRATIONS[N-1]; append, never edit."""


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the database to the newest version in one transaction, or refuse it."""
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
    if app not in (0, APPLICATION_ID) or (app == 0 and tables):
        raise StoreError(f"{path}: this database belongs to another application")
    if version > len(MIGRATIONS):
        raise StoreError(
            f"{path}: schema version {version} is newer than this loopwright knows "
            f"({len(MIGRATIONS)}); upgrade loopwright"
        )
    if version == len(MIGRATIONS):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        # another process may have migrated it while we waited for the lock
        version = db.execute("PRAGMA user_version").fetchone()[0]
        for number in range(version, len(MIGRATIONS)):
            MIGRATIONS[number](db)
            db.execute(f"PRAGMA user_version={number + 1}")
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
