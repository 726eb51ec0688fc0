"""One measurement in this (fresh) process; bench/run.py starts one of these per run.

    python bench/_run_one.py MODULE SCENARIO    # one scenario of one adapter
    python bench/_run_one.py --flatness [STEPS] [--inline]  # loopwright: A's per-step profile
    python bench/_run_one.py --store [STEPS] [--inline]     # loopwright: A with the SQLite store

MODULE is an adapter module name: ours in bench/adapters/ (`floor`, `loopwright_adapter`), the
peers' in bench/peers/adapters/ (`langgraph_peer`, ...; run with the peers' own virtualenv's
python, see bench/peers/install.sh). The module's import is timed, its scenario function builds
the agent (untimed) and returns an async thunk; only awaiting the thunk is timed; then
`scenarios.check` looks at the output and the tools' call counters, and one JSON line is
printed (adapter, scenario, ok, count, seconds, us_per_unit, import_s, rss_ready_kb,
rss_peak_kb, version).

`--flatness` prints one JSON line: {"ok", "ratio", "first_us", "last_us", "seconds", "steps"}
where ratio = cost of the last 50 tool steps / cost of steps 2..51 (see
`loopwright_adapter.flatness`).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import resource
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
OURS = BENCH / "adapters"
PEERS = BENCH / "peers" / "adapters"  # run by the peers' virtualenv (bench/peers/install.sh)
# The loopwright measured is this checkout's, whichever one the environment has installed.
sys.path.insert(0, str(BENCH.parent / "src"))


def run_scenario(module: str, scenario: str) -> int:
    sys.path[:0] = [str(OURS), str(PEERS), str(BENCH)]
    import scenarios

    started = time.perf_counter()
    adapter = importlib.import_module(module)
    import_s = time.perf_counter() - started

    async def measure() -> tuple[object, float, int]:
        thunk = getattr(adapter, scenario)(scenarios.ARGS[scenario])
        rss_ready = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        out = await thunk()
        return out, time.perf_counter() - t0, rss_ready

    out, seconds, rss_ready_kb = asyncio.run(measure())
    ok, count = scenarios.check(scenario, out)
    units = scenarios.UNITS.get(scenario)
    line = {
        "adapter": module,
        "scenario": scenario,
        "ok": ok,
        "count": count,
        "seconds": seconds,
        "us_per_unit": seconds / units * 1e6 if units else None,
        "import_s": import_s,
        "rss_ready_kb": rss_ready_kb,
        "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "version": adapter.VERSION,
    }
    print("\n" + json.dumps(line))
    return 0 if ok else 1


def run_flatness(steps: int, inline: bool) -> int:
    sys.path.insert(0, str(OURS))
    if inline:
        import loopwright_inline  # noqa: F401  (marks ping inline=True)
    from loopwright_adapter import flatness, scenarios, step_profile

    text, stamps = asyncio.run(step_profile(steps)())
    ok = text == scenarios.FINAL and scenarios.CALLS["ping"] == steps and len(stamps) == steps + 2
    ratio = flatness(stamps) if ok else None
    first = (stamps[51] - stamps[1]) / 50 * 1e6 if ok else None
    last = (stamps[steps] - stamps[steps - 50]) / 50 * 1e6 if ok else None
    print(
        "\n"
        + json.dumps(
            {
                "adapter": "loopwright_inline" if inline else "loopwright",
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


def run_store(steps: int, inline: bool) -> int:
    import shutil

    sys.path.insert(0, str(OURS))

    if inline:
        import loopwright_inline  # noqa: F401  (marks ping inline=True)
    from loopwright_adapter import long_loop_store, scenarios

    thunk = long_loop_store(steps)
    t0 = time.perf_counter()
    text = asyncio.run(thunk())
    seconds = time.perf_counter() - t0
    stored = thunk.stored()
    thunk.close()
    shutil.rmtree(thunk.directory, ignore_errors=True)
    ok = text == scenarios.FINAL and scenarios.CALLS["ping"] == steps and stored > steps * 5
    line = {
        "adapter": "loopwright_inline" if inline else "loopwright",
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
    if sys.argv[1:2] in (["--store"], ["--flatness"]):
        inline = "--inline" in sys.argv
        numbers = [a for a in sys.argv[2:] if a != "--inline"]
        steps = int(numbers[0]) if numbers else 500  # scenarios.LONG_STEPS
        sys.exit((run_store if sys.argv[1] == "--store" else run_flatness)(steps, inline))
    module, scenario = sys.argv[1:3]
    if not any((where / f"{module}.py").exists() for where in (OURS, PEERS)):
        sys.exit(f"no adapter {module!r} in {OURS} or {PEERS}")
    sys.exit(run_scenario(module, scenario))


if __name__ == "__main__":
    main()
