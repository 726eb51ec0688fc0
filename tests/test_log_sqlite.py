"""What only the SQLite backend has (the store's conformance suite runs on it and on PostgreSQL:
`test_log_conformance.py`): the schema's migrations from the database the synchronous
`SQLiteStore` wrote (a fixture), refusals, the worker thread, the data-version watch."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from log_conformance import KEY, Clock, approval, reply, safely, said
from loopwright.store import PendingRecord, StoredEvent, StoreError
from loopwright.store.log import SessionKey, Verdict
from loopwright.store.opening import open_log
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.wire import loads

V1_DATABASE = Path(__file__).parent / "data" / "store-v1.db"
"""A database written by the synchronous `SQLiteStore` (schema v1, loopwright before the event
log): two tenants' sessions — a paused one with a decided and an open item, a subagent's, and
one whose run died mid-way — with usage."""


def _v1_contents(path: Path) -> dict[str, Any]:
    """What the v1 file holds, read with plain sqlite3 (the code that wrote it is gone)."""
    with sqlite3.connect(path) as db:
        sessions = db.execute(
            "SELECT tenant, id, agent, last_seq, created_at, updated_at FROM sessions"
        ).fetchall()
        events = {
            (tenant, sid): [
                StoredEvent(seq, loads(data), at)
                for seq, data, at in db.execute(
                    "SELECT seq, data, at FROM events WHERE session_id=? ORDER BY seq", (sid,)
                )
            ]
            for tenant, sid, *_ in sessions
        }
        pending = [
            PendingRecord(
                *row[:7],
                args=json.loads(row[7]),
                reason=row[8],
                requested_at=row[9],
                batch_seq=row[10],
                status=row[11],
                decided_by=row[12],
                decided_at=row[13],
                edited_args=None if row[14] is None else json.loads(row[14]),
                answer=row[15],
                note=row[16],
            )
            for row in db.execute(
                "SELECT id, session_id, tenant, agent, kind, call_id, tool, args, reason, "
                "requested_at, batch_seq, status, decided_by, decided_at, edited_args, answer, "
                "note FROM pending WHERE tenant='acme' ORDER BY rowid"
            )
        ]
        totals = db.execute(
            "SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
            "sum(cache_write_tokens), sum(cost) FROM usage WHERE tenant='acme'"
        ).fetchone()
    keys = "requests input_tokens output_tokens cache_read_tokens cache_write_tokens cost"
    return {
        "sessions": {(t, sid): (agent, last, c, u) for t, sid, agent, last, c, u in sessions},
        "events": events,
        "pending": pending,
        "usage": dict(zip(keys.split(), totals, strict=True)),
    }


def test_a_database_written_by_sqlite_store_migrates_with_everything_in_it(tmp_path):
    path = tmp_path / "loopwright.db"
    shutil.copy(V1_DATABASE, path)
    v1 = _v1_contents(path)
    assert len(v1["sessions"]) == 3 and len(v1["pending"]) == 2

    async def check() -> None:
        log = SQLiteLog(path, clock=Clock(2_000_000_000.0))
        try:
            for (tenant, sid), (agent, last_seq, created, updated) in v1["sessions"].items():
                key = SessionKey(tenant, agent, sid)
                assert await log.read(key) == v1["events"][tenant, sid]
                now = await log.session(key)
                assert (now.last_seq, now.created_at, now.updated_at) == (
                    last_seq,
                    created,
                    updated,
                )
            parent = SessionKey("acme", "support", "order-1")
            assert (await log.session(parent)).status == "paused"
            assert (await log.session(parent)).parent is None
            child = await log.session(SessionKey("acme", "billing", "order-1/billing/call-9"))
            assert (child.status, child.parent) == ("idle", parent)
            left = SessionKey("globex", "support", "order-9")
            assert (await log.session(left)).status == "interrupted"
            assert (await log.pending("acme", status=None)).items == v1["pending"]
            assert await log.usage("acme") == v1["usage"]
            taken = await log.claim(left, "run-new", ttl=30)
            assert (taken.died, taken.lease.epoch, taken.last_seq) == (True, 2, 1)
            denied = await log.decide("acme", "p-2", Verdict("denied", "bob"))
            assert (denied.changed, denied.item.call_id, denied.item.batch_seq) == (True, "c2", 2)
            assert (await log.read(parent))[-1].seq == 9
        finally:
            await log.close()

    asyncio.run(check())
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (7,)


def test_foreign_corrupt_and_newer_databases_are_refused(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable loopwright database"):
        SQLiteLog(garbage)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreError, match="belongs to another application"):
        SQLiteLog(foreign)
    newer = tmp_path / "newer.db"
    asyncio.run(SQLiteLog(newer).close())
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version=8")
    with pytest.raises(StoreError, match="schema version 8 is newer than this loopwright knows"):
        SQLiteLog(newer)


async def test_open_log_opens_the_data_directorys_file_or_a_sqlite_url(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPWRIGHT_HOME", str(tmp_path / "home"))
    default = await open_log()
    assert isinstance(default, SQLiteLog) and default.path == tmp_path / "home" / "loopwright.db"
    await default.close()
    url = await open_log(f"sqlite:///{tmp_path}/other.db")
    assert isinstance(url, SQLiteLog) and url.path == tmp_path / "other.db"
    await url.close()
    with pytest.raises(StoreError, match="closed"):
        await url.read(KEY)
    with pytest.raises(StoreError, match="no event log backend for mysql://"):
        await open_log("mysql://localhost/db")


async def test_calls_run_on_the_logs_worker_thread(tmp_path):
    threads = set()

    def clock() -> float:
        threads.add(threading.current_thread())
        return 1_000.0

    log = SQLiteLog(tmp_path / "loopwright.db", clock=clock, inline_appends=False)
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("hi")])
    await log.close()
    assert threads == {log._worker} and log._worker is not threading.current_thread()


async def test_a_locked_database_fails_clearly(tmp_path):
    log = SQLiteLog(tmp_path / "locked.db", busy_timeout=0.05)
    blocker = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="locked"):
        await log.claim(KEY, "run-1", ttl=30)
    blocker.execute("ROLLBACK")
    blocker.close()
    assert (await log.claim(KEY, "run-1", ttl=30)).lease.epoch == 1
    await log.close()


def parked(log: SQLiteLog, method: str, idle: Callable[[Any], bool]) -> asyncio.Event:
    """Set once `log.<method>` returned an idle answer: its waiter then waits for a commit."""
    event = asyncio.Event()
    real = getattr(log, method)

    async def watched(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        if idle(result):
            event.set()
        return result

    setattr(log, method, watched)
    return event


async def test_a_waiting_follower_is_woken_by_another_processs_commit(tmp_path):
    writer, reader = SQLiteLog(tmp_path / "l.db"), SQLiteLog(tmp_path / "l.db")
    lease = (await writer.claim(KEY, "run-1", ttl=30)).lease
    following = reader.follow(KEY, after=0)
    for n in range(3):
        waiting = parked(reader, "read", lambda rows: rows == [])
        coming = asyncio.ensure_future(anext(following))
        await safely(waiting.wait())  # the reader found nothing new and waits
        assert await writer.append(lease, [said(str(n))]) == n + 1
        assert (await safely(coming)).event == said(str(n))
    await following.aclose()
    await safely(reader._poller)  # the watch ends with its last waiter
    await reader.close()
    await writer.close()


async def test_a_waiting_decision_is_woken_by_another_processs_commit(tmp_path):
    approver, waiter = SQLiteLog(tmp_path / "l.db"), SQLiteLog(tmp_path / "l.db")
    lease = (await approver.claim(KEY, "run-1", ttl=30)).lease
    await approver.append(lease, [said("x"), reply(), approval("p-1")])
    waiting = parked(waiter, "pending_item", lambda item: item.status == "open")
    decided = asyncio.ensure_future(waiter.wait_decided("acme", "p-1"))
    await safely(waiting.wait())
    result = await approver.decide("acme", "p-1", Verdict("approved", "ann"))
    assert await safely(decided) == result.item
    await safely(waiter._poller)
    await waiter.close()
    await approver.close()


async def test_a_waiter_cancelled_leaves_the_others_waiting(tmp_path):
    """Waiters share the next commit's future: one cancelled while it waits (a prompt answered
    first, a stream closed) does not cancel it for the others, nor for a waiter that comes
    after."""
    log = SQLiteLog(tmp_path / "l.db")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("x"), reply(), approval("p-1")])
    waiting = parked(log, "pending_item", lambda item: item.status == "open")
    waiters = []
    for _ in range(3):
        waiting.clear()
        waiters.append(asyncio.ensure_future(log.wait_decided("acme", "p-1")))
        await safely(waiting.wait())  # parked on the next commit
        if len(waiters) == 2:
            waiters[1].cancel()
            await asyncio.gather(waiters[1], return_exceptions=True)
    result = await log.decide("acme", "p-1", Verdict("approved", "ann"))
    assert [await safely(w) for w in (waiters[0], waiters[2])] == [result.item] * 2
    await log.close()
