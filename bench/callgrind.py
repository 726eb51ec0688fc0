"""Instruction counts per unit of work (valgrind's callgrind), which do not drift as wall time
does on a shared machine: the figures of bench/README.md's "Where the time goes".

    python bench/callgrind.py                               # C, floor + loopwright + inline
    python bench/callgrind.py --scenarios long_loop,many_sessions,streaming
    python bench/callgrind.py --adapters loopwright --scenarios many_sessions --keep /tmp/cg

Each (adapter, scenario) is run twice under `valgrind --tool=callgrind`, in a fresh process
that imports the adapter, makes one warm run of the scenario, then `R` measured runs (R = 1,
then R = 3); the difference of the two totals (every thread together) is two warm runs, with
imports and start-up cancelled out. Reported per unit: per step (A), per session (C), per delta
(D), as in bench/run.py. `--keep DIR` keeps both profiles (`ADAPTER.SCENARIO.R.out`);
`--top N` prints the N C functions whose own instructions per unit grow most between them
(where a unit's instructions go: the interpreter, dicts, allocation, the collector...).
Where the floor and loopwright both run A or C, their ratio is judged against its target
(`TARGETS`); `--write` puts the table and the verdicts in bench/RESULTS.md ("## Instructions").
PYTHONHASHSEED is fixed: a run without threads repeats to the instruction; with the tool in
worker threads, where the GIL changes hands varies, figures move by up to 4 %.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import write_section
from run import git_rev

BENCH = Path(__file__).resolve().parent
MODULES = {
    "floor": "floor",
    "loopwright": "loopwright_adapter",
    "loopwright_inline": "loopwright_inline",
}
PER = {"long_loop": "step", "many_sessions": "session", "streaming": "delta", "wide_batch": "run"}
TARGETS = {
    ("long_loop", "loopwright_inline"): 1.8,
    ("long_loop", "loopwright"): 2.5,
    ("many_sessions", "loopwright_inline"): 2.5,
}
"""loopwright's targets in instructions (issue 32): a step of A ≤ 1.8 × the floor's with `ping`
inline and ≤ 2.5 × with it in a thread (the default); a session of C ≤ 2.5 × with `ping`
inline. bench/README.md, "Targets"."""
HOW = {"loopwright_inline": "inline `ping`", "loopwright": "`ping` in a thread"}


def child(module: str, scenario: str, repeats: int) -> None:
    """In the profiled process: one warm run, then `repeats` measured ones."""
    sys.path[:0] = [str(BENCH.parent / "src"), str(BENCH / "adapters"), str(BENCH)]
    import scenarios

    adapter = importlib.import_module(module)

    async def runs() -> None:
        build = adapter.__dict__[scenario]  # each run's agent is built before any runs
        thunks = [build(scenarios.ARGS[scenario]) for _ in range(1 + repeats)]
        for thunk in thunks:
            await thunk()

    asyncio.run(runs())


def total(path: Path) -> int:
    """The total instruction count of a callgrind profile (`totals:` or `summary:`)."""
    found = re.search(r"^(?:totals|summary): (\d+)", path.read_text(), re.M)
    assert found is not None, f"no totals in {path}"
    return int(found.group(1))


def profile(module: str, scenario: str, repeats: int, out: Path) -> int:
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--dump-instr=no",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--child",
        module,
        scenario,
        str(repeats),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return total(out)


def functions(path: Path) -> dict[str, int]:
    """Each C function's own instructions in a profile, by `callgrind_annotate`."""
    argv = ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(path)]
    text = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    costs: dict[str, int] = {}
    for line in text.splitlines():
        found = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(\S.*?)(?: \[.*\])?$", line)
        if found and "PROGRAM TOTALS" not in line:
            name = found.group(2).rsplit("/", 1)[-1]
            costs[name] = costs.get(name, 0) + int(found.group(1).replace(",", ""))
    return costs


def top(one: Path, more: Path, units: int, n: int) -> None:
    """The `n` C functions whose own instructions grow most from `one` to `more` (per unit:
    `units` is the work of the runs `more` made beyond `one`)."""
    before, after = functions(one), functions(more)
    grown = {k: (after.get(k, 0) - before.get(k, 0)) / units for k in after}
    for name, cost in sorted(grown.items(), key=lambda kv: -kv[1])[:n]:
        print(f"    {cost / 1000:8.1f} k  {name}")


def per_unit(adapter: str, scenario: str, keep: Path | None, n: int = 0, extra: int = 2) -> float:
    module = MODULES[adapter]
    sys.path[:0] = [str(BENCH)]
    import scenarios

    units = scenarios.UNITS.get(scenario, scenarios.ARGS[scenario])
    if scenario == "wide_batch":
        units = 1
    with tempfile.TemporaryDirectory(prefix="loopwright-cg-") as tmp:
        where = keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        one = profile(module, scenario, 1, where / f"{adapter}.{scenario}.1.out")
        more = 1 + extra
        more_total = profile(module, scenario, more, where / f"{adapter}.{scenario}.{more}.out")
        if n:
            print(f"  {adapter}, {scenario}: own instructions per unit, by C function")
            one_out, more_out = (where / f"{adapter}.{scenario}.{r}.out" for r in (1, more))
            top(one_out, more_out, units * extra, n)
    return (more_total - one) / extra / units


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenarios", default="many_sessions")
    ap.add_argument("--adapters", default="floor,loopwright,loopwright_inline")
    ap.add_argument("--keep", type=Path, default=None, help="keep the profiles here")
    ap.add_argument("--top", type=int, default=0, help="print the N costliest C functions")
    ap.add_argument(
        "--runs",
        type=int,
        default=2,
        help="measured runs beyond the first (more: the collector's full collections, which come"
        " every few runs, averaged in)",
    )
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    adapters = args.adapters.split(",")
    lines = [
        f"| instructions per unit | {' | '.join(adapters)} |",
        f"|---|{'--:|' * len(adapters)}",
    ]
    print("\n".join(lines), flush=True)
    verdicts = []
    for scenario in args.scenarios.split(","):
        counts = dict.fromkeys(adapters, 0.0)
        for a in adapters:
            counts[a] = per_unit(a, scenario, args.keep, args.top, args.runs)
        floor = counts.get("floor")
        cells = [
            f"{c / 1000:,.1f} k" + (f" ({c / floor:.2f} ×)" if floor and a != "floor" else "")
            for a, c in counts.items()
        ]
        lines.append(f"| {scenario} per {PER[scenario]} | {' | '.join(cells)} |")
        print(lines[-1], flush=True)
        for (judged, adapter), limit in TARGETS.items():
            count = counts.get(adapter)
            if judged != scenario or not floor or not count:
                continue
            verdicts.append(
                f"| {scenario}, {HOW[adapter]} | {count / floor:.2f} × floor | ≤ {limit:g} × floor "
                f"| {'pass' if count / floor <= limit else '**FAIL**'} |"
            )
    if verdicts:
        verdicts[:0] = ["", "| target | measured | limit | result |", "|---|---|---|---|"]
        print("\n".join(verdicts))
    if args.write:
        command = " ".join(["python bench/callgrind.py", *sys.argv[1:]])
        head = [
            "## Instructions (callgrind)",
            "",
            f"Date: {time.strftime('%Y-%m-%d %H:%M %Z')}  ",
            f"loopwright git {git_rev()}; `{command}`: instructions per unit of work under "
            f"valgrind's callgrind, {args.runs} measured runs beyond the first, every thread "
            "together. The ratio targets of A and C are judged here. See bench/README.md.",
            "",
        ]
        write_section(head[0], "\n".join(head + lines + verdicts))


if __name__ == "__main__":
    main()
