"""The PostgreSQL event log's schema and its migrations.

The tables are named `loopwright_*` and live in the connection's current schema (the first of its
`search_path`), so one database holds one log per schema and shares nothing else with the
application beside it. `loopwright_schema` holds the version. Opening migrates an older schema in
one transaction, under an advisory lock (processes starting together migrate once), and refuses a
schema newer than this code knows.

The tables mirror the SQLite log's (`sqlite_schema`): sessions named by (tenant, agent, name) with
an integer key the other tables use, their lease (owner, epoch, expiry in Unix seconds); events
by (session, seq); pending items in request order (`n`); usage rows; the newest snapshot;
(version 2) the controls sent to a session's run, addressed to its lease's epoch; (version 3) the
notifications' outbox, deliveries, attempts, webhook cursors and signing keys (`store.outbox`);
(version 4) the attachments' bytes, one row per SHA-256 (`store.blobs`); (version 5) a fork's
lineage on its session's row (`store.forking`); (version 6) a session's model-written title
(`store.titles`).
Timestamps are the ISO strings the records carry, as on SQLite.
"""

from __future__ import annotations

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from .blobs import PG_TABLE
from .records import StoreError

V1 = """
CREATE TABLE loopwright_sessions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL, agent text NOT NULL, name text NOT NULL,
    parent bigint REFERENCES loopwright_sessions (id),
    status text NOT NULL, last_seq bigint NOT NULL DEFAULT 0,
    last_reply_seq bigint NOT NULL DEFAULT 0, epoch bigint NOT NULL DEFAULT 0,
    owner text, lease_expires double precision,
    created_at text NOT NULL, updated_at text NOT NULL,
    UNIQUE (tenant, agent, name));
CREATE INDEX loopwright_sessions_by_update
    ON loopwright_sessions (tenant, updated_at DESC, id DESC);
CREATE TABLE loopwright_events (
    session bigint NOT NULL, seq bigint NOT NULL, type text NOT NULL,
    data text NOT NULL, at text NOT NULL, PRIMARY KEY (session, seq));
CREATE TABLE loopwright_pending (
    n bigint GENERATED ALWAYS AS IDENTITY UNIQUE, id text PRIMARY KEY,
    session bigint NOT NULL, tenant text NOT NULL, kind text NOT NULL,
    call_id text NOT NULL, tool text NOT NULL, args text NOT NULL, scope text,
    reason text NOT NULL, requested_at text NOT NULL, batch_seq bigint NOT NULL,
    status text NOT NULL, decided_by text, decided_at text, edited_args text,
    answer text, note text);
CREATE INDEX loopwright_pending_by_status ON loopwright_pending (tenant, status, n);
CREATE INDEX loopwright_pending_in_batch ON loopwright_pending (session, batch_seq);
CREATE TABLE loopwright_usage (
    session bigint NOT NULL, seq bigint NOT NULL, tenant text NOT NULL, model text,
    input_tokens bigint NOT NULL, output_tokens bigint NOT NULL,
    cache_read_tokens bigint NOT NULL, cache_write_tokens bigint NOT NULL,
    cost double precision, at text NOT NULL, PRIMARY KEY (session, seq));
CREATE INDEX loopwright_usage_by_tenant ON loopwright_usage (tenant);
CREATE TABLE loopwright_snapshots (
    session bigint PRIMARY KEY, seq bigint NOT NULL, data text NOT NULL, at text NOT NULL)
"""

V2 = """
CREATE TABLE loopwright_controls (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session bigint NOT NULL,
    epoch bigint NOT NULL, kind text NOT NULL, text text, state text NOT NULL,
    sent_at text NOT NULL, handled_at text);
CREATE INDEX loopwright_controls_to_run ON loopwright_controls (session, epoch, state)
"""

V3 = """
CREATE TABLE loopwright_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL,
    item text NOT NULL, event text NOT NULL, at text NOT NULL);
CREATE TABLE loopwright_deliveries (
    id text PRIMARY KEY, notice bigint NOT NULL, target text NOT NULL, state text NOT NULL,
    attempts integer NOT NULL DEFAULT 0, due double precision NOT NULL,
    held_until double precision, held_by text, last_status integer, last_error text,
    created_at text NOT NULL, delivered_at text, UNIQUE (notice, target));
CREATE INDEX loopwright_deliveries_due ON loopwright_deliveries (state, due);
CREATE TABLE loopwright_delivery_attempts (
    delivery text NOT NULL, n integer NOT NULL, at text NOT NULL, status integer, error text,
    PRIMARY KEY (delivery, n));
CREATE TABLE loopwright_notify_targets (target text PRIMARY KEY, floor bigint NOT NULL);
CREATE TABLE loopwright_notify_keys (name text PRIMARY KEY, value text NOT NULL)
"""

V5 = """
ALTER TABLE loopwright_sessions ADD COLUMN forked_from bigint REFERENCES loopwright_sessions (id);
ALTER TABLE loopwright_sessions ADD COLUMN forked_at bigint
"""

V6 = "ALTER TABLE loopwright_sessions ADD COLUMN title text"

MIGRATIONS: list[str] = [V1, V2, V3, PG_TABLE, V5, V6]
"""Schema version N is reached by running MIGRATIONS[N-1]; append, never edit."""

_VERSION = "SELECT version FROM loopwright_schema"
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('loopwright schema ' || current_schema()))"


async def migrate(db: AsyncConnection[TupleRow], where: str) -> str:
    """Bring the schema to the newest version in one transaction, or refuse it; returns the
    schema's name (the log's tables are there). `db` is in autocommit mode."""
    schema = await _current_schema(db, where)
    version = await _version(db)
    if version is not None:
        _refuse_newer(version, where)
        if version == len(MIGRATIONS):
            return schema
    async with db.transaction():
        await db.execute(_LOCK)  # another process may be migrating: after it, we find it done
        await db.execute("CREATE TABLE IF NOT EXISTS loopwright_schema (version integer NOT NULL)")
        version = await _version(db)
        if version is None:
            await db.execute("INSERT INTO loopwright_schema VALUES (0)")
            version = 0
        _refuse_newer(version, where)
        for number in range(version, len(MIGRATIONS)):
            for statement in filter(None, (s.strip() for s in MIGRATIONS[number].split(";"))):
                await db.execute(statement)
            await db.execute("UPDATE loopwright_schema SET version = %s", (number + 1,))
    return schema


async def _current_schema(db: AsyncConnection[TupleRow], where: str) -> str:
    row = await (await db.execute("SELECT current_schema()")).fetchone()
    if row is None or row[0] is None:
        raise StoreError(f"{where}: no schema to create the log's tables in (check search_path)")
    return str(row[0])


async def _version(db: AsyncConnection[TupleRow]) -> int | None:
    """The schema's version: None without a version table (a new schema), refused if newer."""
    exists = await (await db.execute("SELECT to_regclass('loopwright_schema')")).fetchone()
    if exists is None or exists[0] is None:
        return None
    row = await (await db.execute(_VERSION)).fetchone()
    return None if row is None else int(row[0])


def _refuse_newer(version: int, where: str) -> None:
    if version > len(MIGRATIONS):
        raise StoreError(
            f"{where}: schema version {version} is newer than this loopwright knows "
            f"({len(MIGRATIONS)}); upgrade loopwright"
        )


def shown(conninfo: str) -> str:
    """The database as errors name it: `postgresql://user@host:port/dbname`, never a password."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "postgresql (an invalid connection string)"
    user = f"{params['user']}@" if params.get("user") else ""
    port = f":{params['port']}" if params.get("port") else ""
    return (
        f"postgresql://{user}{params.get('host') or 'localhost'}{port}/{params.get('dbname') or ''}"
    )
