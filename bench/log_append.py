"""What one append costs on the event log's SQLite backend, next to a plain sqlite3 commit.

    .venv/bin/python bench/log_append.py [--n 2000] [--rounds 5]

Rows (µs per call, median of the rounds; each round a fresh database in a temporary folder):

- `sqlite3 commit, 1 row` / `5 rows`: the floor — one connection (WAL, synchronous=NORMAL),
  `BEGIN IMMEDIATE`, the INSERTs of events as the log stores them, `COMMIT`, called inline.
- `SQLiteLog.append`: the event log, awaited from a coroutine. An append nothing would wait for
  runs on the event loop (see store/sqlite_worker.py); `on the worker` rows are the same with
  `inline_appends=False`: the call runs on the log's worker thread (the event loop is free
  meanwhile).
- `SQLiteLog.append, 1 event, 8 sessions at once`: eight tasks, each appending to a session of
  its own, one append after another (as eight runs of a server): µs per append, all together.
- `SQLiteLog hop`: an empty call through the worker thread (the cost of being off the loop).

Then how long the event loop waited for one append run on it (µs, over every append of the
1-event rows of every round): the median, the 99th percentile and the longest.

A 5-event batch is a reply, its approval request with the call it is about, a tool's intent:
`message:completed` (with usage), `approval:pending`, `pending:requested`, `tool:started` and
`input:received`.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's first

from loopwright import events as ev
from loopwright.messages import AssistantMessage, Text, Usage, UserMessage
from loopwright.store.log import Lease, SessionKey
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.wire import dumps

ONE: list[ev.Event] = [ev.InputReceived(message=UserMessage(content="hello there"))]
FIVE: list[ev.Event] = [
    ev.MessageCompleted(
        message=AssistantMessage(
            parts=(Text(text="Refunding."),), usage=Usage(input_tokens=10, output_tokens=5)
        )
    ),
    ev.ApprovalPending(
        id="apr_x",
        tool="refund",
        args={"order": "1001"},
        scope=ev.Scope(tenant="t", environment="e", agent="a"),
        reason="refunds need a human",
        requested_at="2026-01-01T00:00:00.000Z",
    ),
    ev.PendingRequested(id="apr_x", call_id="call_1"),
    ev.ToolStarted(id="call_2", tool="ping", args={}, detail_text="ping"),
    ev.InputReceived(message=UserMessage(content="and then?")),
]


def floor(path: Path, size: int, n: int) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE events (session INTEGER, seq INTEGER, type TEXT, data TEXT, at TEXT, "
        "PRIMARY KEY (session, seq)) WITHOUT ROWID"
    )
    rows = [(e.type, dumps(e)) for e in (ONE if size == 1 else FIVE)]
    seq = 0
    start = time.perf_counter()
    for _ in range(n):
        db.execute("BEGIN IMMEDIATE")
        for kind, data in rows:
            seq += 1
            db.execute("INSERT INTO events VALUES (1, ?, ?, ?, 'now')", (seq, kind, data))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed / n * 1e6


INLINE = "inline_appends" in inspect.signature(SQLiteLog).parameters
"""Whether this tree's log runs appends on the event loop (older trees have no such switch)."""
WAITS: list[float] = []
"""Seconds of each 1-event append run on the event loop (its whole await blocks the loop)."""


def opened(path: Path, worker: bool = False) -> SQLiteLog:
    return SQLiteLog(path, inline_appends=False) if worker else SQLiteLog(path)


async def log(path: Path, batch: list[ev.Event] | None, n: int, worker: bool = False) -> float:
    sqlite_log = opened(path, worker)
    lease = (await sqlite_log.claim(SessionKey("t", "a", "s"), "bench", ttl=3600)).lease
    batches = [_fresh(batch, i) for i in range(n)] if batch is not None else []
    waits = []
    start = time.perf_counter()
    if batch is None:
        for _ in range(n):
            await sqlite_log._call(lambda db: None)
    else:
        for events in batches:
            t0 = time.perf_counter()
            await sqlite_log.append(lease, events)
            waits.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    await sqlite_log.close()
    if INLINE and not worker and batch is not None and len(batch) == 1:
        WAITS.extend(waits[1:])  # the first append under a lease goes to the worker
    return elapsed / n * 1e6


async def sessions_at_once(
    path: Path, batch: list[ev.Event], n: int, k: int = 8, worker: bool = False
) -> float:
    sqlite_log = opened(path, worker)
    leases = [
        (await sqlite_log.claim(SessionKey("t", "a", f"s{i}"), "bench", ttl=3600)).lease
        for i in range(k)
    ]

    async def run(lease: Lease) -> None:
        for _ in range(n // k):
            await sqlite_log.append(lease, batch)

    start = time.perf_counter()
    await asyncio.gather(*(run(lease) for lease in leases))
    elapsed = time.perf_counter() - start
    await sqlite_log.close()
    return elapsed / (n // k * k) * 1e6


def _fresh(batch: list[ev.Event], i: int) -> list[ev.Event]:
    """The batch with pending ids unique per append (they are primary keys)."""
    out: list[ev.Event] = []
    for e in batch:
        if isinstance(e, ev.ApprovalPending):
            e = ev.ApprovalPending(**{**_fields(e), "id": f"apr_{i}"})
        elif isinstance(e, ev.PendingRequested):
            e = ev.PendingRequested(id=f"apr_{i}", call_id=e.call_id)
        out.append(e)
    return out


def _fields(e: ev.ApprovalPending) -> dict[str, object]:
    return {k: getattr(e, k) for k in ("id", "tool", "args", "scope", "reason", "requested_at")}


def one_round(folder: Path, n: int) -> dict[str, float]:
    rows = {
        "sqlite3 commit, 1 row": floor(folder / "f1.db", 1, n),
        "sqlite3 commit, 5 rows": floor(folder / "f5.db", 5, n),
        "SQLiteLog.append, 1 event": asyncio.run(log(folder / "l1.db", ONE, n)),
        "SQLiteLog.append, 5 events": asyncio.run(log(folder / "l5.db", FIVE, n)),
        "SQLiteLog.append, 1 event, 8 sessions at once": asyncio.run(
            sessions_at_once(folder / "k.db", ONE, n)
        ),
        "SQLiteLog hop (empty call)": asyncio.run(log(folder / "h.db", None, n)),
    }
    if INLINE:
        rows |= {
            "SQLiteLog.append, 1 event, on the worker": asyncio.run(
                log(folder / "w1.db", ONE, n, worker=True)
            ),
            "SQLiteLog.append, 5 events, on the worker": asyncio.run(
                log(folder / "w5.db", FIVE, n, worker=True)
            ),
            "SQLiteLog.append, 1 event, 8 sessions at once, on the worker": asyncio.run(
                sessions_at_once(folder / "wk.db", ONE, n, worker=True)
            ),
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            for name, us in one_round(Path(tmp), args.n).items():
                rows.setdefault(name, []).append(us)
    base = {1: statistics.median(rows["sqlite3 commit, 1 row"])}
    base[5] = statistics.median(rows["sqlite3 commit, 5 rows"])
    print(f"| ({args.n} calls × {args.rounds} rounds) | µs per call, median | range | × floor |")
    print("|---|--:|--:|--:|")
    for name, values in rows.items():
        us = statistics.median(values)
        size = 5 if "5 " in name else 1
        spread = f"{min(values):.1f}–{max(values):.1f}"
        print(f"| {name} | {us:.1f} | {spread} | {us / base[size]:.2f} |")
    if WAITS:
        waits = sorted(WAITS)
        p50, p99 = (waits[int(q * (len(waits) - 1))] * 1e6 for q in (0.5, 0.99))
        print(
            f"\nThe event loop's wait for one append run on it ({len(waits)} appends): "
            f"median {p50:.1f} µs, 99th percentile {p99:.1f} µs, longest {waits[-1] * 1e6:.1f} µs"
        )


if __name__ == "__main__":
    main()
