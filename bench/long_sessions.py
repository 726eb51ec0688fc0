"""Long sessions (issue 32, goal 2): what a session's length costs, in instructions (callgrind)
and, for its history over HTTP, in ms and bytes.

usage: python bench/long_sessions.py [--sizes 300,30000] [--rows message,open,first,history]
                                     [--keep DIR] [--write]

A session of SIZE stored events is built once per size through the stack of bench/durable.py
(`Runtime` over a SQLite file, real turns: an input, a reply calling `ping`, its result and a
final reply), and its file copied afresh for every measured process. Rows:

* `message`: one more message ("0 pings": an input and a reply to its `done`) on the session
  a runtime keeps after a first one, with the snapshots it saves on the way (one every
  `snapshot_every` = 200 events): the instructions of 110 messages minus those of 10, / 100.
* `open`: `Runtime.open` of the session, warm (the process opened it once before): 3 opens
  minus 1, / 2.
* `first`: the first message after a restart: a fresh process opens the store, sends a message
  to another stored session of 300 events — the imports and one-off warm-ups of opening a session
  and running it, whatever the length — then one message to the long session, to its `done`
  (opened from the log, then the run); minus the same process without that last message.
* `history`: `GET /agents/{name}/sessions/{id}` through the server's ASGI app in process
  (httpx), warm, median ms of 20 (wall: read the ratio, not the figure) and the body's bytes;
  then the same with `?limit=100` (paged) — on a session kept in memory after a message.

Each instruction count runs under `valgrind --tool=callgrind` with `PYTHONHASHSEED=0`, every
thread together. Not a test: nothing fails on a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "src"), str(BENCH)]

from durable import AGENT, SESSION, make_agent  # noqa: E402
from durable_stacks import STACKS  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "loopwright-long-sessions-2"
OTHER = "another"
"""A second session of 300 events in every database (`first` warms up on it)."""
MESSAGE_RUNS = (10, 110)
OPEN_RUNS = (1, 3)


def built(size: int) -> Path:
    """The database of a session of `size` stored events (built once, then copied)."""
    db = CACHE / f"{size}.db"
    if not db.exists():
        subprocess.run([sys.executable, __file__, "--build", str(size)], check=True, cwd=BENCH)
    return db


async def build(size: int) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="loopwright-long-") as tmp:
        stack = STACKS["runtime"](Path(tmp), make_agent())
        await stack.open()
        for session, events in ((SESSION, size), (OTHER, 300)):
            while await stack.last_seq(session) < events:
                await stack.append_turn(session, "1 pings")
        await stack.close()
        for suffix in ("", "-wal", "-shm"):
            if (Path(tmp) / f"loopwright.db{suffix}").exists():
                shutil.copy(Path(tmp) / f"loopwright.db{suffix}", CACHE / f"{size}.db{suffix}")


async def child(row: str, runs: int, directory: Path) -> dict[str, Any]:
    """In the measured process: `runs` units of `row` (0: the set-up alone)."""
    stack = STACKS["runtime"](directory, make_agent())
    await stack.open()
    out: dict[str, Any] = {}
    if row == "message":
        for _ in range(1 + runs):  # (the first: the session opened, then kept)
            assert (await stack.message(SESSION, "0 pings"))[2] == "done"
    elif row == "open":
        for _ in range(1 + runs):
            await stack.runtime.open(stack.key(SESSION))
    elif row == "first":  # (imports and one-off warm-ups paid on another session first)
        assert (await stack.message(OTHER, "0 pings"))[2] == "done"
        for _ in range(runs):
            assert (await stack.message(SESSION, "0 pings"))[2] == "done"
    elif row == "history":
        out = await history(stack)
    await stack.close()
    return out


async def history(stack: Any) -> dict[str, Any]:
    import httpx

    await stack.message(SESSION, "0 pings")  # (the session kept in memory)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=stack.app()), base_url="http://127.0.0.1"
    )
    out: dict[str, Any] = {}
    for name, query in (("full", ""), ("paged", "?limit=100")):
        times, size = [], 0
        for i in range(22):
            t0 = time.perf_counter()
            response = await client.get(f"/agents/{AGENT}/sessions/{SESSION}{query}")
            if i >= 2:
                times.append(time.perf_counter() - t0)
            assert response.status_code == 200, response.text
            size = len(response.content)
        out[name] = {"ms": statistics.median(times) * 1e3, "bytes": size}
    await client.aclose()
    return out


def measure(row: str, size: int, runs: int, valgrind: bool) -> tuple[int | None, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="loopwright-long-") as tmp:
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{built(size)}{suffix}")
            if source.exists():
                shutil.copy(source, Path(tmp) / f"loopwright.db{suffix}")
        argv = [sys.executable, __file__, "--child", row, str(runs), tmp]
        out = Path(tmp) / "callgrind.out"
        if valgrind:
            argv[:0] = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        p = subprocess.run(argv, check=True, env=env, capture_output=True, text=True, cwd=BENCH)
        extra = json.loads(p.stdout.strip().splitlines()[-1])
        if not valgrind:
            return None, extra
        found = re.search(r"^(?:totals|summary): (\d+)", out.read_text(), re.M)
        assert found is not None
        return int(found.group(1)), extra


def instructions(row: str, size: int) -> float:
    """Instructions per unit of `row` on a session of `size` events."""
    low, high = {"message": MESSAGE_RUNS, "open": OPEN_RUNS, "first": (0, 1)}[row]
    a, _ = measure(row, size, low, True)
    b, _ = measure(row, size, high, True)
    assert a is not None and b is not None
    return (b - a) / (high - low)


def main() -> None:
    if sys.argv[1:2] == ["--build"]:
        asyncio.run(build(int(sys.argv[2])))
        return
    if sys.argv[1:2] == ["--child"]:
        row, runs, directory = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
        print(json.dumps(asyncio.run(child(row, runs, directory))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="300,30000")
    ap.add_argument("--rows", default="message,open,first,history")
    ap.add_argument("--rebuild", action="store_true", help="build the sessions again")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.rebuild:
        shutil.rmtree(CACHE, ignore_errors=True)
    lines = [
        f"| {len(sizes) and 'row'} | {' | '.join(f'{s:,} events' for s in sizes)} | ratio |",
        f"|---|{'--:|' * len(sizes)}--:|",
    ]
    print("\n".join(lines), flush=True)
    for row in args.rows.split(","):
        if row == "history":
            got = [measure(row, size, 0, False)[1] for size in sizes]
            for name in ("full", "paged"):
                cells = [f"{g[name]['ms']:.1f} ms ({g[name]['bytes'] / 1000:,.1f} kB)" for g in got]
                ratio = got[-1][name]["ms"] / got[0][name]["ms"]
                lines.append(
                    f"| GET history, {name} (wall) | {' | '.join(cells)} | {ratio:.2f} × |"
                )
                print(lines[-1], flush=True)
            continue
        counts = [instructions(row, size) for size in sizes]
        cells = [f"{c / 1e6:,.2f} M" for c in counts]
        ratio = counts[-1] / counts[0]
        lines.append(f"| {row}, instructions | {' | '.join(cells)} | {ratio:.2f} × |")
        print(lines[-1], flush=True)
    if args.write:
        from _results import write_section

        head = [
            "## Long sessions (callgrind)",
            "",
            f"Date: {time.strftime('%Y-%m-%d %H:%M %Z')}; `python bench/long_sessions.py "
            f'{" ".join(sys.argv[1:])}`. See bench/README.md, "Long sessions".',
            "",
        ]
        write_section(head[0], "\n".join(head + lines))


if __name__ == "__main__":
    main()
