"""What only the SQLite log does to keep a commit short: an append under a lease it appended
under before fences by updating the session's row (no read first), writes that wait share one
transaction (a group commit), and the WAL is checkpointed on a thread of its own."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading

import pytest

from log_conformance import KEY, SAFETY, reply, said
from loopwright.store import StaleWriter
from loopwright.store.log import SessionKey
from loopwright.store.sqlite_log import SQLiteLog


def traced(log: SQLiteLog) -> list[str]:
    """The statements the log's connection runs from now on, their first words."""
    seen: list[str] = []
    log._db.set_trace_callback(lambda sql: seen.append(" ".join(sql.split()[:3])))
    return seen


async def test_an_append_after_the_logs_own_fences_by_the_rows_update(tmp_path):
    log = SQLiteLog(tmp_path / "l.db")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    first = traced(log)
    assert await log.append(lease, [said("hi")]) == 1
    assert first == [
        "BEGIN IMMEDIATE",
        "SELECT id, epoch,",  # the fence: this log has not appended under the lease yet
        "UPDATE sessions SET",
        "INSERT INTO events",
        "COMMIT",
    ]
    then = traced(log)
    assert await log.append(lease, [reply(), said("more")]) == 3
    assert then == ["BEGIN IMMEDIATE", "UPDATE sessions SET", *["INSERT INTO events"] * 2, "COMMIT"]
    assert [s.seq for s in await log.read(KEY)] == [1, 2, 3]
    await log.close()


async def test_a_takeover_between_two_appends_is_still_refused(tmp_path):
    """The row's update is the fence: another process took the session over (its epoch moved,
    the log's seq did not), so the remembered row no longer matches and the read says why."""
    log, other = SQLiteLog(tmp_path / "l.db"), SQLiteLog(tmp_path / "l.db")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("hi")])
    other_db = sqlite3.connect(tmp_path / "l.db", isolation_level=None)
    other_db.execute("UPDATE sessions SET epoch = epoch + 1, owner = 'run-2'")
    other_db.close()
    with pytest.raises(StaleWriter, match=r"taken over \(epoch 2\)"):
        await log.append(lease, [said("late")])
    assert [s.event for s in await other.read(KEY)] == [said("hi")]
    await log.close()
    await other.close()


async def test_commits_reach_the_database_file_by_the_checkpoint_thread(tmp_path):
    log = SQLiteLog(tmp_path / "l.db", checkpoint_every=4)
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    for n in range(3):  # with the claim: four commits
        await log.append(lease, [said(str(n))])
    checkpoints = log._checkpoints
    assert await asyncio.to_thread(checkpoints.ran.wait, SAFETY)
    assert checkpoints.done == 1
    shutil.copy(tmp_path / "l.db", tmp_path / "alone.db")  # the file without its WAL
    with sqlite3.connect(tmp_path / "alone.db") as db:
        assert db.execute("SELECT seq FROM events ORDER BY seq").fetchall() == [(1,), (2,), (3,)]
    await log.close()
    assert not checkpoints._thread.is_alive()  # closing the log stops it


async def test_a_log_with_few_commits_starts_no_checkpoint_thread(tmp_path):
    log = SQLiteLog(tmp_path / "l.db")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    for n in range(3):
        await log.append(lease, [said(str(n))])
    await log.close()
    assert log._checkpoints._thread is None


async def test_writes_that_wait_share_one_transaction_and_a_failed_one_undoes_only_itself(
    tmp_path,
):
    log = SQLiteLog(tmp_path / "l.db")
    keys = [SessionKey("acme", "support", f"order-{n}") for n in range(3)]
    leases = [(await log.claim(key, "run-1", ttl=30)).lease for key in keys]
    await log.release(leases[2], "idle")  # its appends are refused from now on
    entered, gate = threading.Event(), threading.Event()

    def hold(db: sqlite3.Connection) -> bool:
        entered.set()
        return gate.wait(SAFETY)

    held = asyncio.ensure_future(log._call(hold))  # the worker waits for the gate
    assert await asyncio.to_thread(entered.wait, SAFETY)
    appends = [
        asyncio.ensure_future(log.append(leases[0], [said("a")])),
        asyncio.ensure_future(log.append(leases[2], [said("stale")])),
        asyncio.ensure_future(log.read(keys[0])),  # a read waits for the writes before it
        asyncio.ensure_future(log.append(leases[1], [said("b"), reply()])),
        asyncio.ensure_future(log.append(leases[0], [said("c")])),
    ]
    await asyncio.sleep(0)  # one turn of the loop: each call is handed to the worker
    assert log._runner._jobs.qsize() == len(appends)
    before = log._runner.transactions
    gate.set()
    assert await held
    results = await asyncio.gather(*appends, return_exceptions=True)
    assert results[0] == 1 and isinstance(results[1], StaleWriter)
    assert [s.event for s in results[2]] == [said("a")]
    assert results[3:] == [2, 2]
    assert log._runner.transactions == before + 2  # [a, stale], then the read, then [b, c]
    assert [s.event for s in await log.read(keys[0])] == [said("a"), said("c")]
    assert [s.event for s in await log.read(keys[1])] == [said("b"), reply()]
    assert await log.read(keys[2]) == []
    assert (await log.session(keys[2])).last_seq == 0
    await log.close()
