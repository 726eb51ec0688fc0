"""What only the SQLite log does to keep a commit short: an append under a lease it appended
under before fences by updating the session's row (no read first), an append nothing would wait
for runs on the event loop, writes that wait share one transaction on the worker (a group
commit), and the WAL is checkpointed on a thread of its own."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading

import pytest

from log_conformance import KEY, SAFETY, reply, said
from loopwright.store import StaleWriter
from loopwright.store.log import SessionKey
from loopwright.store.sqlite_checkpoints import Checkpointer
from loopwright.store.sqlite_log import SQLiteLog


def traced(log: SQLiteLog) -> list[str]:
    """The statements the log's connection runs from now on, their first words."""
    seen: list[str] = []
    log._db.set_trace_callback(lambda sql: seen.append(" ".join(sql.split()[:3])))
    return seen


async def test_an_append_after_the_logs_own_fences_by_the_rows_update(tmp_path):
    log = SQLiteLog(tmp_path / "l.db", inline_appends=False)
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
    first = [log.append(leases[0], [said("a")]), log.append(leases[2], [said("stale")])]
    read = asyncio.ensure_future(log.read(keys[0]))  # a read waits for the writes before it
    await asyncio.sleep(0)  # one turn of the loop: the read is handed to the worker after them
    appends = [*first, read]
    appends += [log.append(leases[1], [said("b"), reply()]), log.append(leases[0], [said("c")])]
    assert log._runner._jobs.qsize() == len(appends)  # (an append is handed over as it is made)
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


def handovers(log: SQLiteLog) -> asyncio.Event:
    """Set each time a call is handed to the log's worker thread."""
    handed = asyncio.Event()
    submit = log._runner.submit

    def handing(*args):
        handed.set()
        return submit(*args)

    log._runner.submit = handing  # type: ignore[method-assign]
    return handed


class Threads:
    """A log's clock that notes the thread of each call (a write reads it once the lock is
    taken)."""

    def __init__(self) -> None:
        self.seen: list[threading.Thread] = []

    def __call__(self) -> float:
        self.seen.append(threading.current_thread())
        return 1_000.0


async def test_an_append_nothing_waits_for_runs_on_the_event_loop(tmp_path):
    """The worker is idle, the write lock free and the last append was under the same lease
    (or the lease's claim was the last): the append's transaction runs where it is made, without
    waiting for SQLite's lock (busy timeout 0, set back only once the worker runs again), as
    the claim's did. After another lease's append it goes to the worker, where the appends of
    several runs at once share transactions."""
    threads = Threads()
    log = SQLiteLog(tmp_path / "l.db", clock=threads)
    worker, loop = log._worker, threading.current_thread()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    assert await log.append(lease, [said("hi")]) == 1
    statements = traced(log)
    assert await log.append(lease, [said("again")]) == 2
    assert await log.append(lease, [said("and again")]) == 3
    transaction = ["BEGIN IMMEDIATE", "UPDATE sessions SET", "INSERT INTO events", "COMMIT"]
    assert statements == [*transaction, *transaction]  # (the claim turned the timeout off)
    statements.clear()
    await log.read(KEY)  # the worker's next call waits for locks again
    assert statements[0] == "PRAGMA busy_timeout=5000"
    statements.clear()
    assert await log.append(lease, [said("once more")]) == 4
    assert statements == ["PRAGMA busy_timeout=0", *transaction]
    other = (await log.claim(SessionKey("acme", "support", "o-2"), "run-1", ttl=30)).lease
    for appender in (other, lease, lease):
        await log.append(appender, [said("more")])
    assert threads.seen == [loop] * 7 + [worker, loop]  # (the claims ran on the loop too)
    await log.close()
    full = SQLiteLog(tmp_path / "f.db", clock=threads, durability="full")  # every commit syncs
    lease = (await full.claim(KEY, "run-1", ttl=30)).lease
    threads.seen.clear()
    for n in range(2):
        assert await full.append(lease, [said("hi")]) == n + 1
    assert threads.seen == [full._worker] * 2
    await full.close()


async def test_an_append_made_on_the_event_loop_is_a_future_done_as_it_returns(tmp_path):
    """Awaiting it takes no turn of the loop; what it raised is raised when it is awaited (a
    stale lease), as from the worker; one made after another run's call is handed to the
    worker, and not done yet."""
    log = SQLiteLog(tmp_path / "l.db")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.claim(SessionKey("acme", "support", "o-2"), "run-1", ttl=30)
    first = log.append(lease, [said("hi")])
    assert isinstance(first, asyncio.Future) and not first.done()  # (handed to the worker)
    assert await first == 1
    second = log.append(lease, [said("again")])
    assert second.done() and second.result() == 2
    await log.release(lease, "idle")
    stale = log.append(lease, [said("late")])
    assert stale.done()
    with pytest.raises(StaleWriter, match="was released"):
        await stale
    assert [s.seq for s in await log.read(KEY)] == [1, 2]
    await log.close()


async def test_an_append_waits_on_the_worker_while_another_connection_holds_the_lock(tmp_path):
    log = SQLiteLog(tmp_path / "l.db")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    handed = handovers(log)
    assert await log.append(lease, [said("hi")]) == 1  # (on the loop: its claim came last)
    handed.clear()
    blocker = sqlite3.connect(tmp_path / "l.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    appended = asyncio.ensure_future(log.append(lease, [said("again")]))
    await asyncio.wait_for(handed.wait(), SAFETY)  # the event loop went on meanwhile
    assert not appended.done()
    blocker.execute("ROLLBACK")
    blocker.close()
    assert await asyncio.wait_for(appended, SAFETY) == 2
    await log.close()


async def test_a_call_made_on_the_loop_that_finds_the_database_locked_goes_to_the_worker(
    tmp_path,
):
    """A claim while another connection holds the write lock, and a call that finds the
    database locked (SQLite's own error, as a read may get while another process recovers
    the WAL): each is handed to the worker, which waits for the lock; the loop goes on."""
    log = SQLiteLog(tmp_path / "l.db")
    await log.claim(KEY, "run-1", ttl=30)  # (the tables exist; the loop made it)
    handed = handovers(log)

    def locked_read(db: sqlite3.Connection) -> str:
        db.execute("BEGIN IMMEDIATE")  # (SQLITE_BUSY without waiting, on the loop)
        db.execute("ROLLBACK")
        return "read"

    other = SessionKey("acme", "support", "o-2")
    for call in (lambda: log.claim(other, "run-1", ttl=30), lambda: log._briefly(locked_read)):
        handed.clear()
        blocker = sqlite3.connect(tmp_path / "l.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        made = asyncio.ensure_future(call())
        await asyncio.wait_for(handed.wait(), SAFETY)  # the event loop went on meanwhile
        assert not made.done()
        blocker.execute("ROLLBACK")
        blocker.close()
        assert await asyncio.wait_for(made, SAFETY)
    assert (await log.session(other)).status == "running"
    await log.close()


def test_a_wal_the_passive_checkpoint_cannot_empty_gets_a_full_one(tmp_path):
    """A reader still on an older snapshot keeps the passive checkpoint from copying the
    newest pages (as appends that never pause do): past `net` pages, the thread runs a full
    checkpoint (here it finds the reader and gives up at once, to try again next time)."""
    path = tmp_path / "l.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (n INTEGER)")
    reader = sqlite3.connect(path, isolation_level=None)
    for held in (False, True):
        if held:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM t").fetchone()  # its snapshot is taken now
        writer.execute("INSERT INTO t VALUES (1)")
        checkpoints = Checkpointer(path, "NORMAL", every=1, net=1, wait=0)
        checkpoints.committed()
        assert checkpoints.ran.wait(SAFETY)
        checkpoints.close()
        assert (checkpoints.done, checkpoints.full) == (1, int(held))
    reader.execute("COMMIT")
    reader.close()
    writer.close()
