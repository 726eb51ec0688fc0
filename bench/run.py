"""loopwright's benchmark: framework overhead with an instant fake model, against the floor
(plain asyncio) and any installed peer, on the four scenarios of bench/scenarios.py.

usage: python bench/run.py [-n 5] [--scenarios long_loop,...] [--adapters floor,loopwright,...]
                           [--peers] [--json out.json] [--timeout 300]

The floor and loopwright need nothing beside the repo. `--peers` adds the peer frameworks
(langgraph, smolagents, pydantic-ai, openai-agents): their adapters are in bench/peers/adapters/
and they run with the python of their own virtualenv (bench/peers/install.sh makes it in
bench/.venv-peers, or $LOOPWRIGHT_PEERS_VENV); a peer that is not installed there is skipped
with a note. Every (adapter, scenario) run is a fresh process (bench/_run_one.py), N rounds
interleaved so machine drift spreads over every adapter. One uncounted warm-up per adapter comes
first. Medians go to stdout and bench/RESULTS.md (rewritten each time); --json writes every run.
Not a test: it exits 0 even when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RUN_ONE = BENCH / "_run_one.py"
PEERS_VENV = Path(os.environ.get("LOOPWRIGHT_PEERS_VENV") or BENCH / ".venv-peers")
"""The peers' own virtualenv (bench/peers/install.sh), never the project's environment."""
PEER_PYTHON = PEERS_VENV / "bin" / "python"

SCENARIOS = ["long_loop", "wide_batch", "many_sessions", "streaming"]
FLATNESS = "flatness"  # loopwright's own: A's last 50 steps vs steps 2..51, in-process stamps
STORE = "store"  # loopwright's own: A with the SQLite store, inline tool ≤ 400 µs/step
TARGET_STORE_US = 400.0  # 300 on the machine it was set on, scaled by the reference tree: README
OWN = (FLATNESS, STORE)

# adapter name -> (module, import name that must be available, distribution); floor and
# loopwright are ours (bench/adapters/), the peers' are in bench/peers/adapters/
ADAPTERS = {
    "floor": ("floor", None, None),
    "loopwright": ("loopwright_adapter", "loopwright", "loopwright"),
    "loopwright_inline": ("loopwright_inline", "loopwright", "loopwright"),
    "langgraph": ("langgraph_peer", "langgraph", "langgraph"),
    "smolagents": ("smolagents_peer", "smolagents", "smolagents"),
    "pydantic_ai": ("pydantic_ai_peer", "pydantic_ai", "pydantic-ai-slim"),
    "openai_agents": ("openai_agents_peer", "agents", "openai-agents"),
}
ALWAYS = ["floor", "loopwright", "loopwright_inline"]  # _inline: its sync tool on the loop
PEERS = [a for a in ADAPTERS if a not in ALWAYS]

# Targets for loopwright judged in wall time. A's and C's ratios to the floor are judged in
# instructions (bench/callgrind.py, which does not move with the CPU); their wall ratios are
# reported here.
TARGET_B_S = 0.06  # B wall s
TARGET_D_US = 3.0  # D µs/delta
TARGET_FLAT = 1.3  # A: last 50 steps ≤ 1.3 × steps 2..51
IN_INSTRUCTIONS = "reported (the target, ≤ 3 × floor, is in instructions: bench/callgrind.py)"
# other scripts' sections (callgrind.py, http_bench.py, imports.py, http_peers.py)
KEPT = ("\n## Instructions", "\n## HTTP server", "\n## Start-up", "\n## HTTP peer")


PROBE = """import importlib.util, json, sys
from importlib.metadata import version
print(json.dumps({d: version(d) for p, d in json.loads(sys.argv[1]) if importlib.util.find_spec(p)}))
"""


def peer_versions() -> dict[str, str]:
    """Distribution -> version of the peers installed in the peers' virtualenv (none without it)."""
    if not PEER_PYTHON.exists():
        return {}
    probes = json.dumps([ADAPTERS[a][1:] for a in PEERS])
    p = subprocess.run(
        [str(PEER_PYTHON), "-c", PROBE, probes], capture_output=True, text=True, timeout=120
    )
    return json.loads(p.stdout) if p.returncode == 0 else {}


def available(name: str, peers: dict[str, str]) -> bool:
    module, _, dist = ADAPTERS[name]
    if name in ALWAYS:
        return (BENCH / "adapters" / f"{module}.py").exists()
    return dist in peers


def run_once(adapter: str, scenario: str, timeout: float) -> dict:
    module = ADAPTERS[adapter][0]
    python = str(PEER_PYTHON) if adapter in PEERS else sys.executable
    argv = [python, str(RUN_ONE)]
    argv += [f"--{scenario}"] if scenario in OWN else [module, scenario]
    if scenario in OWN and adapter == "loopwright_inline":
        argv.append("--inline")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=BENCH)
    except subprocess.TimeoutExpired:
        return {"adapter": adapter, "scenario": scenario, "ok": False, "error": "timeout"}
    at = p.stdout.rfind('{"adapter"')
    try:
        rec = json.loads(p.stdout[at:].splitlines()[0]) if at >= 0 else {"ok": False}
    except json.JSONDecodeError:
        rec = {"ok": False}
    rec.update(
        adapter=adapter, scenario=scenario, rc=p.returncode, process_wall_s=time.perf_counter() - t0
    )
    if p.returncode != 0 or not rec.get("ok"):
        rec["ok"] = False
        rec["stderr_tail"] = p.stderr[-2000:]
    return rec


# ---- reporting ------------------------------------------------------------------------------


def machine_line() -> str:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(BENCH), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            ["git", "-C", str(BENCH), "status", "--porcelain", "--", "../src"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return (
            out.stdout.strip() + (" (src modified)" if dirty else "")
            if out.returncode == 0
            else "?"
        )
    except (OSError, subprocess.SubprocessError):
        return "?"


def med(runs: list[dict], key: str, scale: float = 1.0) -> float | None:
    vals = [r[key] * scale for r in runs if r.get("ok") and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def spread(runs: list[dict], key: str = "seconds") -> float | None:
    vals = [r[key] for r in runs if r.get("ok") and r.get(key) is not None]
    return max(vals) / min(vals) if len(vals) > 1 and min(vals) > 0 else None


def fmt(v: float | None, digits: int = 0, suffix: str = "") -> str:
    return "–" if v is None else f"{v:,.{digits}f}{suffix}"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def verdict(value: float | None, limit: float) -> str:
    return "–" if value is None else ("pass" if value <= limit else "**FAIL**")


def render(results: list[dict], meta: dict) -> str:
    by: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        by.setdefault((r["adapter"], r["scenario"]), []).append(r)
    g = lambda a, s: by.get((a, s), [])  # noqa: E731
    adapters = [a for a in meta["adapters"]]
    versions = {r["adapter"]: r.get("version") for r in results if r.get("version")}
    fl = {
        s: med(g("floor", s), "us_per_unit" if s in ("long_loop", "streaming") else "seconds")
        for s in SCENARIOS
    }

    lines = [
        "# loopwright benchmark: framework overhead with an instant fake model",
        "",
        f"Date: {meta['date']}  ",
        f"Machine: {meta['machine']}; /proc/loadavg {meta.get('load', '?')}  ",
        f"Versions: {meta['versions']}  ",
        f"Command: `{meta['command']}`; {meta['runs']} runs per cell, each a fresh process, "
        "interleaved; cells are medians. Scenarios, tools and floor: bench/scenarios.py and "
        "bench/adapters/"
        + (
            "; the peers' adapters: bench/peers/adapters/, run in their own virtualenv"
            if meta["peers"]
            else ""
        )
        + ". See bench/README.md.",
        "",
        "| adapter | version | A long loop µs/step | A ×floor | B wide batch s (ideal 0.05) "
        "| C 200 sessions s | C ×floor | D streaming µs/delta | D ×floor | A peak RSS MB | import s |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for a in adapters:
        A = med(g(a, "long_loop"), "us_per_unit")
        B = med(g(a, "wide_batch"), "seconds")
        C = med(g(a, "many_sessions"), "seconds")
        D = med(g(a, "streaming"), "us_per_unit")
        allruns = [r for s in SCENARIOS for r in g(a, s)]
        lines.append(
            "| "
            + " | ".join(
                [
                    a,
                    str(versions.get(a, "?")),
                    fmt(A, 1),
                    fmt(ratio(A, fl["long_loop"]), 2),
                    fmt(B, 3),
                    fmt(C, 4),
                    fmt(ratio(C, fl["many_sessions"]), 2),
                    fmt(D, 2),
                    fmt(ratio(D, fl["streaming"]), 2),
                    fmt(med(g(a, "long_loop"), "rss_peak_kb", 1 / 1024), 1),
                    fmt(med(allruns, "import_s"), 2),
                ]
            )
            + " |"
        )

    if meta["peers"]:
        lines += peer_ratios(g, meta["peers"])

    lw = lambda s, k: med(g("loopwright", s), k)  # noqa: E731
    li = lambda s, k: med(g("loopwright_inline", s), k)  # noqa: E731
    A, B = lw("long_loop", "us_per_unit"), lw("wide_batch", "seconds")
    C, D = lw("many_sessions", "seconds"), lw("streaming", "us_per_unit")
    Ai, Ci = li("long_loop", "us_per_unit"), li("many_sessions", "seconds")
    flat, flat_i = lw(FLATNESS, "ratio"), li(FLATNESS, "ratio")
    stored, stored_inline = lw(STORE, "us_per_unit"), li(STORE, "us_per_unit")
    first, last = lw(FLATNESS, "first_us"), lw(FLATNESS, "last_us")
    first_i, last_i = li(FLATNESS, "first_us"), li(FLATNESS, "last_us")
    rows = [
        (
            "A long loop, inline tool",
            f"{fmt(Ai, 1)} µs/step = {fmt(ratio(Ai, fl['long_loop']), 2)} × floor",
            IN_INSTRUCTIONS,
            "–",
        ),
        (
            "A long loop, tool in a thread (default)",
            f"{fmt(A, 1)} µs/step = {fmt(ratio(A, fl['long_loop']), 2)} × floor",
            "reported (a thread hop per step)",
            "–",
        ),
        (
            "A flatness (last 50 / steps 2–51), inline tool",
            f"{fmt(flat_i, 2)} ({fmt(last_i, 1)} vs {fmt(first_i, 1)} µs/step)",
            f"≤ {TARGET_FLAT:g}",
            verdict(flat_i, TARGET_FLAT),
        ),
        (
            "A flatness, tool in a thread (default)",
            f"{fmt(flat, 2)} ({fmt(last, 1)} vs {fmt(first, 1)} µs/step)",
            "reported (where the scheduler puts the threads)",
            "–",
        ),
        (
            "A with the SQLite store, inline tool",
            f"{fmt(stored_inline, 1)} µs/step (in memory: {fmt(Ai, 1)})",
            f"≤ {TARGET_STORE_US:g} µs/step",
            verdict(stored_inline, TARGET_STORE_US),
        ),
        (
            "A with the SQLite store, tool in a thread (default)",
            f"{fmt(stored, 1)} µs/step (in memory: {fmt(A, 1)})",
            "reported (a thread hop per step)",
            "–",
        ),
        ("B wide batch", f"{fmt(B, 3)} s", f"≤ {TARGET_B_S:g} s", verdict(B, TARGET_B_S)),
        (
            "C 200 sessions, inline tool",
            f"{fmt(Ci, 4)} s = {fmt(ratio(Ci, fl['many_sessions']), 2)} × floor",
            IN_INSTRUCTIONS,
            "–",
        ),
        (
            "C 200 sessions, tool in a thread (default)",
            f"{fmt(C, 4)} s = {fmt(ratio(C, fl['many_sessions']), 2)} × floor",
            "reported",
            "–",
        ),
        (
            "D streaming",
            f"{fmt(D, 2)} µs/delta",
            f"≤ {TARGET_D_US:g} µs/delta",
            verdict(D, TARGET_D_US),
        ),
    ]
    lines += [
        "",
        "## loopwright targets",
        "",
        "| target | measured (median) | limit | result |",
        "|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows if "loopwright" in adapters]
    if "loopwright" not in adapters:
        lines.append("| (loopwright not run) | – | – | – |")

    lines += [
        "",
        "Spread of the timed figure across runs (max/min):",
        "",
        "| adapter | A | B | C | D | flatness |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for a in adapters:
        cells = [fmt(spread(g(a, s)), 2) for s in SCENARIOS]
        cells.append(fmt(spread(g(a, FLATNESS), "ratio"), 2) if a.startswith("loopwright") else "")
        lines.append("| " + " | ".join([a, *cells]) + " |")
    bad = [r for r in results if not r.get("ok")]
    lines += [
        "",
        f"Failed or unchecked runs: {len(bad)}"
        + (
            " (" + ", ".join(sorted({f"{r['adapter']}/{r['scenario']}" for r in bad})) + ")"
            if bad
            else ""
        ),
    ]
    if meta.get("skipped"):
        lines.append(
            f"Peers skipped (not installed in {PEERS_VENV.name}): {', '.join(meta['skipped'])}. "
            "See bench/README.md (bench/peers/install.sh)."
        )
    return "\n".join(lines) + "\n"


def peer_ratios(g, peers: list[str]) -> list[str]:
    """How many times loopwright's time each peer takes, in this run: A (µs/step), C (s), D
    (µs/delta), against loopwright with its sync tool in a thread (as the peers but smolagents
    run theirs) and inline (as smolagents and the floor do)."""
    keys = {"long_loop": "us_per_unit", "many_sessions": "seconds", "streaming": "us_per_unit"}
    ours = {a: {s: med(g(a, s), k) for s, k in keys.items()} for a in ALWAYS[1:]}
    lines = [
        "",
        "Each peer's time over loopwright's, same run (A µs/step, C s, D µs/delta; "
        "loopwright with its sync tool in a thread / inline):",
        "",
        "| peer | A × loopwright | C × loopwright | D × loopwright |",
        "|---|--:|--:|--:|",
    ]
    for a in peers:
        cells = []
        for s, k in keys.items():
            theirs = med(g(a, s), k)
            both = [ratio(theirs, ours[w][s]) for w in ALWAYS[1:]]
            cells.append(" / ".join(fmt(r, 0 if r and r >= 10 else 1) for r in both))
        lines.append("| " + " | ".join([a, *cells]) + " |")
    return lines


def versions_line(adapters: list[str], peers: dict[str, str]) -> str:
    out = []
    for name in adapters:
        dist = ADAPTERS[name][2]
        if name in PEERS and dist in peers:
            out.append(f"{dist} {peers[dist]} (peers' virtualenv)")
        elif dist and not any(o.startswith(f"{dist} ") for o in out):  # (two rows, one package)
            with contextlib.suppress(PackageNotFoundError):
                out.append(f"{dist} {version(dist)}")
    for dist in ["pydantic", "pydantic-core"]:
        with contextlib.suppress(PackageNotFoundError):
            out.append(f"{dist} {version(dist)}")
    return ", ".join(out) + f"; loopwright git {git_rev()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="runs per cell (default 5)")
    ap.add_argument(
        "--scenarios",
        default=",".join([*SCENARIOS, *OWN]),
        help=f"comma list of {', '.join([*SCENARIOS, *OWN])}",
    )
    ap.add_argument(
        "--adapters",
        default=None,
        help="comma list (default: floor, loopwright and every installed peer)",
    )
    ap.add_argument(
        "--peers",
        action="store_true",
        help="add every peer installed in the peers' virtualenv (bench/peers/install.sh)",
    )
    ap.add_argument("--json", metavar="OUT", help="also write every run to this JSON file")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per process")
    args = ap.parse_args()

    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in scenarios if s not in [*SCENARIOS, *OWN]]
    if unknown:
        ap.error(f"unknown scenarios {unknown}")
    wanted = args.adapters.split(",") if args.adapters else ALWAYS + (PEERS if args.peers else [])
    unknown = [a for a in wanted if a not in ADAPTERS]
    if unknown:
        ap.error(f"unknown adapters {unknown} (known: {', '.join(ADAPTERS)})")
    peers = peer_versions() if any(a in PEERS for a in wanted) else {}
    adapters, skipped = [], []
    for a in wanted:
        (adapters if available(a, peers) else skipped).append(a)
    if skipped:
        print(
            f"note: not installed in {PEERS_VENV}, skipped: {', '.join(skipped)} "
            "(bench/peers/install.sh installs them)",
            flush=True,
        )

    def cells(a: str) -> list[str]:
        return [s for s in scenarios if s not in OWN or a in ("loopwright", "loopwright_inline")]

    load = Path("/proc/loadavg").read_text().split()[:3]
    for a in adapters:  # one uncounted warm-up per adapter (file cache, bytecode)
        run_once(a, "streaming", args.timeout)
    results = []
    for i in range(args.n):
        for s in scenarios:
            for a in adapters:
                if s not in cells(a):
                    continue
                r = run_once(a, s, args.timeout)
                r["round"] = i
                results.append(r)
                fig = (
                    f"ratio={r['ratio']:.3f}"
                    if s == FLATNESS and r.get("ok")
                    else f"t={r.get('seconds', float('nan')):.4f}s"
                )
                print(f"[{i + 1}/{args.n}] {a:14s} {s:14s} ok={r.get('ok')} {fig}", flush=True)
                if not r.get("ok"):
                    print(
                        "    "
                        + (r.get("stderr_tail") or r.get("error") or "")
                        .strip()
                        .replace("\n", "\n    ")[-800:],
                        flush=True,
                    )

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine_line(),
        "load": f"{' '.join(load)} at the start, "
        + " ".join(Path("/proc/loadavg").read_text().split()[:3])
        + " at the end",
        "versions": versions_line(adapters, peers),
        "runs": args.n,
        "adapters": adapters,
        "skipped": skipped,
        "peers": [a for a in adapters if a in PEERS],
        "command": "python bench/run.py " + " ".join(shlex.quote(x) for x in sys.argv[1:]),
    }
    md = render(results, meta)
    print("\n" + md, end="")
    results_md = BENCH / "RESULTS.md"
    kept = results_md.read_text() if results_md.exists() else ""
    # callgrind.py's and http_bench.py's sections stay until those scripts are run again
    starts = [at for at in (kept.find(k) for k in KEPT) if at >= 0]
    results_md.write_text(md + (kept[min(starts) :] if starts else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
