"""The durable step in instructions (valgrind's callgrind, every thread), against its floor in
the same run: the figures of issue 32's goal 1, which wall time on a shared machine distorts.

usage: python bench/durable_cg.py [--steps 100,500] [--keep DIR] [--calls]

Three measures, each the difference of two fresh processes under callgrind (`--steps` A,B: a
run of B steps minus a run of A steps, divided by B − A: imports, start-up, the store's opening
and the run's ends cancel out):

* `floor`: bench/durable.py's `run_floor`, plain `sqlite3`, WAL, `synchronous=NORMAL`, two
  commits a step (an intent row, commit; a result row, commit), `wal_autocheckpoint=0` (the
  event log's checkpoints run on a thread of their own, not in its commits);
* `durable`: bench/durable.py's scenario A (one instant inline `ping` call a step, instant
  `FunctionModel`), a new session's first message through `Runtime.send` on a fresh SQLite
  file (`store.open_log`);
* `memory`: the same run on an in-memory `Session` (the loop alone).

The store's share is durable − memory; its ratio to the floor is goal 1's (≤ 2 ×). `--calls`
also counts, in a plain run, the write transactions and the SQLite statements a step makes
(`execute`/`executemany` on the log's connection). PYTHONHASHSEED is fixed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SRC = BENCH.parent / "src"


def child(kind: str, steps: int) -> None:
    """One run, in this process (under callgrind)."""
    sys.path[:0] = [str(SRC), str(BENCH)]
    import durable
    from durable_stacks import STACKS

    STACKS["runtime"].ttl = 3600.0  # (no lease lapses, nor is renewed, in a slowed-down run)
    directory = Path(tempfile.mkdtemp(prefix="durable-cg-"))
    if kind == "floor":
        assert durable.run_floor(steps, directory, checkpoints=False)["ok"]
        return
    out = asyncio.run(durable.run_steps(kind, "runtime", steps, directory))
    assert out["ok"], out


def instructions(kind: str, steps: int, keep: Path | None) -> int:
    where = keep or Path(tempfile.mkdtemp(prefix="durable-cg-out-"))
    out = where / f"{kind}.{steps}.out"
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(SRC))
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            kind,
            str(steps),
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(where / f"{kind}.{steps}.err").open("w"),
    )
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"{out}: no totals")


class Counted:
    """A connection (or cursor) whose `execute`/`executemany` calls are counted (the rest
    passes through)."""

    def __init__(self, db: Any) -> None:
        self.db, self.calls = db, 0

    def execute(self, *args: Any) -> Any:
        self.calls += 1
        return self.db.execute(*args)

    def executemany(self, *args: Any) -> Any:
        self.calls += 1
        return self.db.executemany(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def calls(steps: int) -> tuple[float, float]:
    """(write transactions, SQLite calls) a step, durable, from a 2-run difference."""
    sys.path[:0] = [str(SRC), str(BENCH)]
    import durable
    from durable_stacks import STACKS

    async def run(n: int) -> tuple[int, int]:
        stack = STACKS["runtime"](
            Path(tempfile.mkdtemp(prefix="durable-cg-")), durable.make_agent()
        )
        await stack.open()
        runner = stack.log._runner
        counted = runner.db = Counted(runner.db)
        cursor = runner.cursor = Counted(runner.cursor)  # (BEGIN, COMMIT, an append's)
        before = runner.transactions
        await stack.message(durable.SESSION, f"{n} pings")
        done = runner.transactions - before, counted.calls + cursor.calls
        runner.db, runner.cursor = counted.db, cursor.db
        await stack.close()
        return done

    small, large = asyncio.run(run(steps // 5)), asyncio.run(run(steps))
    span = steps - steps // 5
    return (large[0] - small[0]) / span, (large[1] - small[1]) / span


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", default="100,500")
    ap.add_argument("--keep", type=Path, help="keep the profiles here")
    ap.add_argument("--calls", action="store_true", help="count transactions and statements")
    args = ap.parse_args()
    a, b = (int(s) for s in args.steps.split(","))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    per = {}
    for kind in ("floor", "durable", "memory"):
        per[kind] = (instructions(kind, b, args.keep) - instructions(kind, a, args.keep)) / (b - a)
    share = per["durable"] - per["memory"]
    floor = per["floor"]
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    print(
        "| instructions per step (k) | floor | durable | memory | store's share | share × floor |"
    )
    print("|---|--:|--:|--:|--:|--:|")
    print(
        f"| A, SQLite, {b}−{a} steps | {floor / 1e3:,.1f} | {per['durable'] / 1e3:,.1f} | "
        f"{per['memory'] / 1e3:,.1f} | {share / 1e3:,.1f} | {share / floor:.2f} |"
    )
    if args.calls:
        commits, statements = calls(b)
        print(f"write transactions a step: {commits:.2f}; SQLite calls a step: {statements:.2f}")


if __name__ == "__main__":
    main()
