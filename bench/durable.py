"""loopwright's durable benchmark: what the store adds per step, and what a message costs as its
session grows.

usage: python bench/durable.py [-n 3] [--steps 500] [--sizes 300,3000,30000] [--messages 5]
                               [--stack runtime] [--no-http] [--json OUT] [--write]

Three measures, each run in a fresh process with fresh files, in N interleaved rounds; cells are
medians:

* `floor`: plain `sqlite3` on a WAL file with `synchronous=NORMAL`, two commits per step (an
  intent row, commit; a result row, commit). µs per step. `floor-nockpt`: the same with
  `wal_autocheckpoint=0`, so none of its commits runs a checkpoint (the event log's
  checkpoints run on a thread of their own, not inside its commits).
* `durable` / `memory`: STEPS steps of one instant inline `ping` call each, then "done", from an
  instant `FunctionModel`; on a durable session in a fresh SQLite file (the stack's store), and
  on an in-memory `Session` (the loop alone). µs per step; `durable` also × floor.
* `length`: a session of SIZE stored events is built through the stack with real turns (each an
  input, a reply calling `ping`, the tool's events and a final reply); then, with the store
  opened afresh, MESSAGES new messages (after one uncounted), each the session opened from the
  store plus a one-step turn to its `done`; and the same over HTTP (the stack's ASGI app,
  in-process through httpx's ASGI transport), interleaved. ms per message, × the smallest SIZE.

The durable stack is pluggable (`STACKS` in bench/durable_stacks.py): `runtime` is the event log
(`store.sqlite_log`) under the runtime service. (The synchronous store measured in DURABLE.md's
"before" table was removed; run this script from that commit's tree to measure it again.) Not a test: every run is checked, but nothing fails on a figure. The machine may be
shared: compare the ratios within one run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))  # this checkout's loopwright comes first

from durable_stacks import STACKS  # noqa: E402  (bench/ is the script's directory)

from loopwright import Agent, Session, tool  # noqa: E402
from loopwright.messages import ToolCall, ToolResultMessage, Usage  # noqa: E402
from loopwright.testing import FunctionModel, Reply  # noqa: E402

SESSION = "bench-session"
AGENT = "bench"
WARMUP = 1  # uncounted messages per length process
USAGE = Usage(input_tokens=10, output_tokens=1)  # a fixed report: no token estimate per step
FINAL = "done"

# ---- the agent: an instant model and one inline tool ------------------------------------------

CALLS = [0]
_ids = itertools.count(1)


def ping(i: int, of: int) -> str:
    """Answer pong with the call's number and the run's goal."""
    CALLS[0] += 1
    return f"pong {i}/{of}"


def reply(request: Any) -> Reply:
    """A prompt "N pings" asks for N steps with one `ping` call each, then "done" (N=0: one
    step answering "done"). The next call is read from the last tool output alone (O(1))."""
    last = request.messages[-1]
    if type(last) is ToolResultMessage:
        done, _, goal = last.content.rpartition(" ")[2].partition("/")
        following, goal_n = int(done) + 1, int(goal)
    else:
        following, goal_n = 0, int(last.content.split()[0])
    if following >= goal_n:
        return Reply(text=FINAL, usage=USAGE)
    call = ToolCall(id=f"call-{next(_ids)}", name="ping", args={"i": following, "of": goal_n})
    return Reply(tool_calls=(call,), usage=USAGE)


def make_agent() -> Agent:
    return Agent(
        model=FunctionModel(reply),
        tools=[tool(ping, inline=True)],
        max_turns=100_000,
        name=AGENT,
    )


# ---- one measurement (in a child process) ------------------------------------------------------


def run_floor(steps: int, directory: Path, checkpoints: bool = True) -> dict[str, Any]:
    """Plain sqlite3: two commits per step (the call's intent, then its result); without
    `checkpoints`, no commit runs one (SQLite's default runs one at 1,000 WAL pages)."""
    db = sqlite3.connect(directory / "floor.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    if not checkpoints:
        db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(
        "CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, "
        "data TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID"
    )
    db.commit()
    insert = "INSERT INTO events VALUES (?, ?, ?, ?)"
    t0 = time.perf_counter()
    for k in range(steps):
        call = {"id": f"call-{k}", "name": "ping", "args": {"i": k, "of": steps}}
        db.execute(insert, (SESSION, 2 * k + 1, "tool:started", json.dumps(call)))
        db.commit()
        result = {"id": f"call-{k}", "content": f"pong {k}/{steps}"}
        db.execute(insert, (SESSION, 2 * k + 2, "tool:result", json.dumps(result)))
        db.commit()
    seconds = time.perf_counter() - t0
    rows = db.execute("SELECT count(*) FROM events").fetchone()[0]
    db.close()
    return {"ok": rows == 2 * steps, "seconds": seconds, "us_per_step": seconds / steps * 1e6}


async def run_steps(kind: str, stack_name: str, steps: int, directory: Path) -> dict[str, Any]:
    """`steps` one-ping steps: the first message of a new durable session (`durable`; the
    store is opened before the clock starts), or a run of an in-memory one (`memory`)."""
    agent = make_agent()
    if kind == "durable":
        stack = STACKS[stack_name](directory, agent)
        await stack.open()
        _, seconds, text = await stack.message(SESSION, f"{steps} pings")
        stored = await stack.last_seq(SESSION)
        await stack.close()
    else:
        memory = Session(agent)
        t0 = time.perf_counter()
        text = str((await memory.run(f"{steps} pings").result()).text)
        seconds = time.perf_counter() - t0
        stored = None
    ok = text == FINAL and CALLS[0] == steps and (stored is None or stored > 5 * steps)
    out = {"ok": ok, "seconds": seconds, "us_per_step": seconds / steps * 1e6}
    return out | ({"stored_events": stored} if stored is not None else {})


async def run_length(
    stack_name: str, size: int, messages: int, http: bool, directory: Path
) -> dict[str, Any]:
    """Build a session of `size` stored events, then time new messages on it."""
    stack = STACKS[stack_name](directory, make_agent())
    await stack.open()
    t0 = time.perf_counter()
    turns = 0
    while await stack.last_seq(SESSION) < size:
        await stack.append_turn(SESSION, "1 pings")
        turns += 1
    build_s = time.perf_counter() - t0
    built = await stack.last_seq(SESSION)
    await stack.close()

    stack = STACKS[stack_name](directory, make_agent())  # a fresh connection, as a new server
    await stack.open()
    gc.collect()
    app = stack.app() if http else None
    client = None
    if app is not None:
        import httpx

        transport = httpx.ASGITransport(app=app)
        client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=600)
    opens, runs, totals, over_http, ok = [], [], [], [], True
    for i in range(WARMUP + messages):
        opened, total, text = await stack.message(SESSION, "0 pings")
        ok = ok and text == FINAL
        if i >= WARMUP:
            opens.append(opened)
            runs.append(total - opened)
            totals.append(total)
        if client is not None:
            t0 = time.perf_counter()
            response = await client.post(
                f"/agents/{AGENT}/messages", json={"message": "0 pings", "sessionId": SESSION}
            )
            elapsed = time.perf_counter() - t0
            ok = ok and response.status_code == 200 and response.json().get("text") == FINAL
            if i >= WARMUP:
                over_http.append(elapsed)
    if client is not None:
        await client.aclose()
    after = await stack.last_seq(SESSION)
    await stack.close()
    med = lambda xs: statistics.median(xs) * 1e3 if xs else None  # noqa: E731
    return {
        "ok": ok and built >= size,
        "stored_events": built,
        "stored_after": after,
        "build_turns": turns,
        "build_s": build_s,
        "open_ms": med(opens),
        "run_ms": med(runs),
        "message_ms": med(totals),
        "http_ms": med(over_http),
        "samples_ms": [x * 1e3 for x in totals],
        "http_samples_ms": [x * 1e3 for x in over_http],
    }


def child(argv: list[str]) -> int:
    """`--one KIND STACK ARG [MESSAGES HTTP]`: one measurement, one JSON line on stdout."""
    kind, stack_name, arg = argv[0], argv[1], int(argv[2])
    directory = Path(tempfile.mkdtemp(prefix="loopwright-durable-"))
    try:
        if kind in ("floor", "floor-nockpt"):
            out = run_floor(arg, directory, checkpoints=kind == "floor")
        elif kind in ("durable", "memory"):
            out = asyncio.run(run_steps(kind, stack_name, arg, directory))
        else:
            out = asyncio.run(run_length(stack_name, arg, int(argv[3]), argv[4] == "1", directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("\n" + json.dumps({"kind": kind, "stack": stack_name, "arg": arg, **out}))
    return 0 if out["ok"] else 1


# ---- the runner --------------------------------------------------------------------------------


def measure(args: list[str], timeout: float) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", *args]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=BENCH)
    except subprocess.TimeoutExpired:
        return {"kind": args[0], "arg": int(args[2]), "ok": False, "error": "timeout"}
    at = p.stdout.rfind('{"kind"')
    try:
        rec = json.loads(p.stdout[at:].splitlines()[0]) if at >= 0 else {}
    except json.JSONDecodeError:
        rec = {}
    if p.returncode != 0 or not rec.get("ok"):
        rec = {"kind": args[0], "arg": int(args[2]), **rec, "ok": False}
        rec["stderr_tail"] = p.stderr[-2000:]
    return rec


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def summarise(runs: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any]:
    """Medians; each `x` ratio is the median of the ratios taken within one round (the two
    figures measured minutes apart at most), so drift between rounds cancels out."""

    def cell(kind: str, key: str, arg: int | None = None) -> dict[int, float]:
        return {
            r["round"]: r[key]
            for r in runs
            if r["kind"] == kind and r.get("ok") and r.get(key) is not None
            if arg is None or r["arg"] == arg
        }

    def med(values: dict[int, float]) -> float | None:
        return statistics.median(values.values()) if values else None

    def paired(a: dict[int, float], b: dict[int, float]) -> float | None:
        return med({i: a[i] / b[i] for i in a.keys() & b.keys() if b[i]})

    def spread(values: dict[int, float]) -> list[float] | None:
        return [min(values.values()), max(values.values())] if values else None

    floor, durable = cell("floor", "us_per_step"), cell("durable", "us_per_step")
    memory, bare = cell("memory", "us_per_step"), cell("floor-nockpt", "us_per_step")
    share = {i: durable[i] - memory[i] for i in durable.keys() & memory.keys()}
    out: dict[str, Any] = {
        "floor_us": med(floor),
        "floor_nockpt_us": med(bare),
        "floor_nockpt_x_floor": paired(bare, floor),
        "durable_us": med(durable),
        "durable_x_floor": paired(durable, floor),
        "durable_x_floor_nockpt": paired(durable, bare),
        "range": {
            "floor": spread(floor),
            "floor_nockpt": spread(bare),
            "durable": spread(durable),
            "memory": spread(memory),
        },
        "memory_us": med(memory),
        "memory_x_floor": paired(memory, floor),
        "store_share_us": med(share),
        "store_share_x_floor": paired(share, floor),
        "length": {},
    }
    first = (
        {key: cell("length", key, sizes[0]) for key in ("message_ms", "http_ms")} if sizes else {}
    )
    for size in sizes:
        keys = ("stored_events", "stored_after", "open_ms", "run_ms", "message_ms", "http_ms")
        keys += ("build_s",)
        figures = {key: cell("length", key, size) for key in keys}
        out["length"][size] = {key: med(values) for key, values in figures.items()} | {
            "x_first": paired(figures["message_ms"], first["message_ms"]),
            "http_x_first": paired(figures["http_ms"], first["http_ms"]),
        }
    return out


def render(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    steps, sizes = meta["steps"], meta["sizes"]
    floor = summary["floor_us"]
    http = any(c["http_ms"] is not None for c in summary["length"].values())

    def span(key: str) -> str:
        low_high = summary["range"][key]
        return "–" if low_high is None else f"{fmt(low_high[0])}–{fmt(low_high[1])}"

    lines = [
        f"## Results: {meta['stack']} stack",
        "",
        f"Date: {meta['date']}  ",
        f"Machine: {meta['machine']}; load average {meta['load'][0]:.2f} at start, "
        f"{meta['load'][1]:.2f} at the end  ",
        f"loopwright git {meta['git']}; `{meta['command']}`: {meta['n']} rounds, each "
        "measurement a fresh process with fresh files, interleaved; cells are medians, and "
        "each × is the median of the ratios taken within one round.",
        "",
        f"Per step ({steps} steps, one inline `ping` call each, instant model):",
        "",
        "| measure | µs/step | range | × floor |",
        "|---|--:|--:|--:|",
        f"| floor: plain `sqlite3`, WAL, `synchronous=NORMAL`, 2 commits/step | {fmt(floor)} "
        f"| {span('floor')} | 1.00 |",
        f"| the floor without checkpoints in its commits (`wal_autocheckpoint=0`) "
        f"| {fmt(summary['floor_nockpt_us'])} | {span('floor_nockpt')} "
        f"| {fmt(summary['floor_nockpt_x_floor'], 2)} |",
        f"| loopwright, durable session ({meta['stack']} stack, fresh SQLite file) "
        f"| {fmt(summary['durable_us'])} | {span('durable')} "
        f"| {fmt(summary['durable_x_floor'], 2)} |",
        f"| loopwright, in-memory session (the loop alone) | {fmt(summary['memory_us'])} "
        f"| {span('memory')} | {fmt(summary['memory_x_floor'], 2)} |",
        f"| the store's share (durable − in-memory) | {fmt(summary['store_share_us'])} "
        f"| | {fmt(summary['store_share_x_floor'], 2)} |",
        "",
        f"The durable session is {fmt(summary['durable_x_floor_nockpt'], 2)} × the floor "
        "without checkpoints in its commits.",
    ]
    if sizes:
        lines += [
            "",
            f"One new message on a session of N stored events (open it from the store, run a "
            f"one-step turn to its `done`; {meta['messages']} messages per process after "
            f"{WARMUP} uncounted"
            + (", each followed by one over HTTP" if http else "; no HTTP: " + meta["no_http"])
            + ", so the session grows to the second figure by the last one), ms:",
            "",
            f"| stored events | open ms | run ms | message ms | × {sizes[0]:,} | HTTP ms "
            f"| HTTP × {sizes[0]:,} |",
            "|--:|--:|--:|--:|--:|--:|--:|",
        ]
    for size in sizes:
        c = summary["length"][size]
        lines.append(
            f"| {fmt(c['stored_events'], 0)} → {fmt(c['stored_after'], 0)} "
            f"| {fmt(c['open_ms'], 2)} | {fmt(c['run_ms'], 2)} | {fmt(c['message_ms'], 2)} | {fmt(c['x_first'], 2)} | {fmt(c['http_ms'], 2)} "
            f"| {fmt(c['http_x_first'], 2)} |"
        )
    bad = meta["failed"]
    lines += ["", f"Failed or unchecked runs: {len(bad)}" + (f" ({', '.join(bad)})" if bad else "")]
    return "\n".join(lines) + "\n"


def machine_line() -> str:
    cpu = "?"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"


def git_line() -> str:
    def git(*args: str) -> str:
        try:
            p = subprocess.run(["git", "-C", str(BENCH), *args], capture_output=True, text=True)
        except OSError:
            return ""
        return p.stdout.strip() if p.returncode == 0 else ""

    rev = git("rev-parse", "--short", "HEAD") or "?"
    return rev + (" (src modified)" if git("status", "--porcelain", "--", "../src") else "")


def write_section(section: str) -> None:
    """Replace this stack's "## Results: …" section of bench/DURABLE.md, or append it."""
    path = BENCH / "DURABLE.md"
    text = path.read_text() if path.exists() else "# Durable benchmark\n"
    heading = section.splitlines()[0]
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    text, found = pattern.subn(lambda _: section + "\n", text)
    if not found:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        sys.exit(child(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--steps", type=int, default=500, help="steps per step run (default 500)")
    ap.add_argument(
        "--sizes", default="300,3000,30000", help="stored events per session ('' for none)"
    )
    ap.add_argument("--messages", type=int, default=5, help="timed messages per length process")
    ap.add_argument("--stack", choices=sorted(STACKS), default="runtime")
    ap.add_argument("--no-http", action="store_true", help="skip the HTTP messages")
    ap.add_argument("--json", metavar="OUT", help="also write every run and the summary here")
    ap.add_argument(
        "--write", action="store_true", help="update this stack's section of DURABLE.md"
    )
    ap.add_argument("--timeout", type=float, default=900, help="seconds per process")
    args = ap.parse_args()
    sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(",") if s)
    stack, http = args.stack, "0" if args.no_http else "1"
    load_start = os.getloadavg()[0]
    jobs = [
        ["floor", stack, str(args.steps)],
        ["floor-nockpt", stack, str(args.steps)],
        ["durable", stack, str(args.steps)],
        ["memory", stack, str(args.steps)],
        *(["length", stack, str(size), str(args.messages), http] for size in sizes),
    ]
    measure(["memory", stack, "50"], args.timeout)  # uncounted: file cache, bytecode
    runs = []
    for i in range(args.n):
        for job in jobs:
            rec = measure(job, args.timeout) | {"round": i}
            runs.append(rec)
            figure = rec.get("us_per_step") or rec.get("message_ms")
            print(
                f"[{i + 1}/{args.n}] {job[0]:8s} {job[2]:>6s} ok={rec['ok']} {figure}", flush=True
            )
            if not rec["ok"]:
                print(rec.get("stderr_tail", rec.get("error", "")), file=sys.stderr, flush=True)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine_line(),
        "git": git_line(),
        "command": " ".join(["python bench/durable.py", *sys.argv[1:]]),
        "load": [load_start, os.getloadavg()[0]],
        "n": args.n,
        "steps": args.steps,
        "sizes": sizes,
        "messages": args.messages,
        "stack": stack,
        "no_http": "--no-http" if args.no_http else f"the {stack} stack has no app",
        "failed": sorted({f"{r['kind']} {r['arg']}" for r in runs if not r["ok"]}),
    }
    summary = summarise(runs, sizes)
    section = render(summary, meta)
    print("\n" + section)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs}))
    if args.write:
        write_section(section)


if __name__ == "__main__":
    main()
