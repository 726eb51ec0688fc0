"""One measurement in this (fresh) process; bench/run.py starts one of these per run.

    python bench/_run_one.py MODULE SCENARIO    # delegate to the shared run_one.py
    python bench/_run_one.py --flatness [STEPS] # loopwright only: A's per-step profile
    python bench/_run_one.py --store [STEPS]    # loopwright only: A with the SQLite store

MODULE is an adapter module name (`floor`, `loopwright_adapter`, `pydantic_ai`, ...). The
shared `run_one.py` imports `adapters.<MODULE>`; neither the shared `adapters/` nor ours has an
`__init__.py`, so with both parent directories on sys.path `adapters` is one namespace package
spanning both, and the shared runner (its timing, checks and JSON line) is used unchanged.

`--flatness` prints one JSON line: {"ok", "ratio", "first_us", "last_us", "seconds", "steps"}
where ratio = cost of the last 50 tool steps / cost of steps 2..51 (see
`loopwright_adapter.flatness`).
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# Same rule as loopwright_adapter.peers_dir(), without importing loopwright here: the shared
# runner times the adapter's import, and the floor must not pay for loopwright's.
PEERS = Path(
    os.environ.get("LOOPWRIGHT_PEERS_DIR") or BENCH.parent / ".." / "shared" / "bench" / "peers"
).resolve()


def run_flatness(steps: int) -> int:
    sys.path.insert(0, str(BENCH / "adapters"))
    from loopwright_adapter import common, flatness, step_profile  # it puts common on the path

    text, stamps = asyncio.run(step_profile(steps)())
    ok = text == common.FINAL and common.CALLS["ping"] == steps and len(stamps) == steps + 2
    ratio = flatness(stamps) if ok else None
    first = (stamps[51] - stamps[1]) / 50 * 1e6 if ok else None
    last = (stamps[steps] - stamps[steps - 50]) / 50 * 1e6 if ok else None
    print(
        "\n"
        + json.dumps(
            {
                "adapter": "loopwright",
                "scenario": "flatness",
                "ok": ok,
                "ratio": ratio,
                "first_us": first,
                "last_us": last,
                "seconds": stamps[-1] - stamps[0],
                "steps": steps,
            }
        )
    )
    return 0 if ok else 1


def run_store(steps: int) -> int:
    import time

    sys.path.insert(0, str(BENCH / "adapters"))
    import shutil

    from loopwright_adapter import common, long_loop_store

    thunk = long_loop_store(steps)
    t0 = time.perf_counter()
    text = asyncio.run(thunk())
    seconds = time.perf_counter() - t0
    stored = len(thunk.store.load("bench", "default"))
    thunk.store.close()
    shutil.rmtree(thunk.directory, ignore_errors=True)
    ok = text == common.FINAL and common.CALLS["ping"] == steps and stored > steps * 5
    line = {
        "adapter": "loopwright",
        "scenario": "store",
        "ok": ok,
        "seconds": seconds,
        "us_per_unit": seconds / steps * 1e6,
        "steps": steps,
        "stored_events": stored,
    }
    print("\n" + json.dumps(line))
    return 0 if ok else 1


def main() -> None:
    if sys.argv[1:2] == ["--store"]:
        sys.exit(run_store(int(sys.argv[2]) if len(sys.argv) > 2 else 500))
    if sys.argv[1:2] == ["--flatness"]:
        steps = int(sys.argv[2]) if len(sys.argv) > 2 else 500  # common.LONG_STEPS
        sys.exit(run_flatness(steps))
    # run_one.py puts the shared dir first; ours follows, so `adapters` spans both.
    sys.path.insert(0, str(BENCH))
    sys.argv = [str(PEERS / "run_one.py"), *sys.argv[1:]]
    runpy.run_path(str(PEERS / "run_one.py"), run_name="__main__")


if __name__ == "__main__":
    main()
