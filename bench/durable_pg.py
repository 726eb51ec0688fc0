"""loopwright's durable benchmark on PostgreSQL: what the PostgreSQL event log adds per step, as a
ratio to a plain psycopg floor measured in the same run, next to SQLite's.

usage: python bench/durable_pg.py [-n 3] [--steps 300] [--url URL] [--json OUT]

Five measures, each run in a fresh process (a fresh schema, or fresh files), in N interleaved
rounds; cells are medians, and each × is the median of the ratios taken within one round:

* `pg floor`: plain psycopg on a connection to the same server with the same settings (loopback
  TCP, `synchronous_commit` on), two commits per step: an intent row, COMMIT; a result row,
  COMMIT. µs per step.
* `pg durable`: STEPS steps of one instant inline `ping` call each, then "done", from an instant
  model (bench/durable.py's agent), as one message on a new session of the runtime service over
  `PostgresLog` (`open_log(url)`). µs per step, × pg floor; also the log's commits per step.
* `sqlite floor`, `sqlite durable`, `memory`: bench/durable.py's own measures
  (`durable.py --one floor|durable|memory runtime STEPS`): plain `sqlite3`, WAL,
  `synchronous=NORMAL`, two commits per step; the same run on the SQLite log; on an in-memory
  session (the loop alone: durable − memory is the store's share).

The server is `--url` (a database where the script may create and drop schemas), else a private
one started as the tests start theirs (tests/pg_cluster.py: `initdb` in a temporary directory,
fsync on, loopback only, as user `postgres` when run as root), stopped at the end. Not a test:
every run is checked, nothing fails on a figure. The machine may be shared: compare the ratios
within one run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))  # this checkout's loopwright comes first
sys.path.insert(1, str(BENCH.parent / "tests"))  # the tests' private server (pg_cluster)

import durable  # noqa: E402  (bench/ is the script's directory)

TENANT = "default"


def run_pg_floor(url: str, steps: int) -> dict[str, Any]:
    """Plain psycopg: two commits per step (the call's intent, then its result)."""
    import psycopg

    with psycopg.connect(url) as db:
        db.execute(
            "CREATE TABLE events (session_id text NOT NULL, seq bigint NOT NULL, "
            "type text NOT NULL, data text NOT NULL, PRIMARY KEY (session_id, seq))"
        )
        db.commit()
        insert = "INSERT INTO events VALUES (%s, %s, %s, %s)"
        t0 = time.perf_counter()
        for k in range(steps):
            call = {"id": f"call-{k}", "name": "ping", "args": {"i": k, "of": steps}}
            db.execute(insert, (durable.SESSION, 2 * k + 1, "tool:started", json.dumps(call)))
            db.commit()
            result = {"id": f"call-{k}", "content": f"pong {k}/{steps}"}
            db.execute(insert, (durable.SESSION, 2 * k + 2, "tool:result", json.dumps(result)))
            db.commit()
        seconds = time.perf_counter() - t0
        row = db.execute("SELECT count(*) FROM events").fetchone()
    ok = row is not None and row[0] == 2 * steps
    return {"ok": ok, "seconds": seconds, "us_per_step": seconds / steps * 1e6, "commits": 2}


async def run_pg_durable(url: str, steps: int) -> dict[str, Any]:
    """`steps` one-ping steps as the first message of a new session (the log is opened before
    the clock starts), counting the log's write transactions."""
    from loopwright.runtime import Runtime
    from loopwright.store.log import SessionKey
    from loopwright.store.opening import open_log
    from loopwright.store.pg_log import PostgresLog

    log = await open_log(url)
    assert isinstance(log, PostgresLog)
    writes = [0]
    run = log._run

    async def counted(job: Any, *, write: bool = False, **options: Any) -> Any:
        writes[0] += write
        return await run(job, write=write, **options)

    log._run = counted  # type: ignore[method-assign]
    agent = durable.make_agent()
    runtime = Runtime({agent.name: agent}, log)
    t0 = time.perf_counter()
    live = await runtime.send(TENANT, agent.name, durable.SESSION, f"{steps} pings")
    done = await live.wait()
    seconds = time.perf_counter() - t0
    stored = (await log.session(SessionKey(TENANT, agent.name, durable.SESSION))).last_seq
    await runtime.close()
    await log.close()
    text = None if done is None else done.text
    ok = text == durable.FINAL and durable.CALLS[0] == steps and stored > 5 * steps
    return {
        "ok": ok,
        "seconds": seconds,
        "us_per_step": seconds / steps * 1e6,
        "stored_events": stored,
        "commits": writes[0] / steps,
    }


def child(argv: list[str]) -> int:
    """`--one pgfloor|pgdurable URL STEPS`: one measurement, one JSON line on stdout."""
    kind, url, steps = argv[0], argv[1], int(argv[2])
    pg_floor = kind == "pgfloor"
    out = run_pg_floor(url, steps) if pg_floor else asyncio.run(run_pg_durable(url, steps))
    print("\n" + json.dumps({"kind": kind, "arg": steps, **out}))
    return 0 if out["ok"] else 1


# ---- the runner --------------------------------------------------------------------------------


class Schemas:
    """A fresh schema of the server per measurement (dropped after it)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def fresh(self) -> tuple[str, str]:
        import psycopg

        name = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f'CREATE SCHEMA "{name}"'.encode())
        joint = "&" if "?" in self.url else "?"
        return name, f"{self.url}{joint}options={quote(f'-c search_path={name}')}"

    def drop(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{name}" CASCADE'.encode())


def measure(job: list[str], schemas: Schemas, timeout: float) -> dict[str, Any]:
    kind = job[0]
    schema = None
    if kind.startswith("pg"):
        schema, url = schemas.fresh()
        argv = [sys.executable, str(Path(__file__).resolve()), "--one", kind, url, job[1]]
    else:
        argv = [sys.executable, str(BENCH / "durable.py"), "--one", kind, "runtime", job[1]]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=BENCH)
    except subprocess.TimeoutExpired:
        return {"kind": kind, "ok": False, "error": "timeout"}
    finally:
        if schema is not None:
            schemas.drop(schema)
    at = p.stdout.rfind('{"kind"')
    try:
        rec = json.loads(p.stdout[at:].splitlines()[0]) if at >= 0 else {}
    except json.JSONDecodeError:
        rec = {}
    if p.returncode != 0 or not rec.get("ok"):
        rec = {"kind": kind, **rec, "ok": False, "stderr_tail": p.stderr[-2000:]}
    return rec


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def cell(kind: str, key: str = "us_per_step") -> dict[int, float]:
        return {r["round"]: r[key] for r in runs if r["kind"] == kind and r.get("ok")}

    def med(values: dict[int, float]) -> float | None:
        return statistics.median(values.values()) if values else None

    def paired(a: dict[int, float], b: dict[int, float]) -> float | None:
        return med({i: a[i] / b[i] for i in a.keys() & b.keys() if b[i]})

    def minus(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
        return {i: a[i] - b[i] for i in a.keys() & b.keys()}

    pg_floor, pg = cell("pgfloor"), cell("pgdurable")
    sq_floor, sq, memory = cell("floor"), cell("durable"), cell("memory")
    return {
        "pg_floor_us": med(pg_floor),
        "pg_durable_us": med(pg),
        "pg_x_floor": paired(pg, pg_floor),
        "pg_commits_per_step": med(cell("pgdurable", "commits")),
        "pg_share_us": med(minus(pg, memory)),
        "pg_share_x_floor": paired(minus(pg, memory), pg_floor),
        "sqlite_floor_us": med(sq_floor),
        "sqlite_durable_us": med(sq),
        "sqlite_x_floor": paired(sq, sq_floor),
        "sqlite_share_us": med(minus(sq, memory)),
        "sqlite_share_x_floor": paired(minus(sq, memory), sq_floor),
        "memory_us": med(memory),
        "pg_x_sqlite": paired(pg, sq),
    }


def render(s: dict[str, Any], meta: dict[str, Any]) -> str:
    f = durable.fmt
    return "\n".join(
        [
            "## Results: PostgreSQL",
            "",
            f"Date: {meta['date']}  ",
            f"Machine: {meta['machine']}; load average {meta['load'][0]:.2f} at start, "
            f"{meta['load'][1]:.2f} at the end; PostgreSQL {meta['server']} ({meta['where']})  ",
            f"loopwright git {meta['git']}; `{meta['command']}`: {meta['n']} rounds, each "
            "measurement a fresh process on a fresh schema (or fresh files), interleaved; cells "
            "are medians, each × the median of the ratios taken within one round.",
            "",
            f"Per step ({meta['steps']} steps, one inline `ping` call each, instant model):",
            "",
            "| measure | µs/step | × its floor | commits/step |",
            "|---|--:|--:|--:|",
            f"| PostgreSQL floor: plain psycopg, 2 commits/step | {f(s['pg_floor_us'])} "
            "| 1.00 | 2 |",
            f"| loopwright, durable session on PostgreSQL (`PostgresLog`) "
            f"| {f(s['pg_durable_us'])} | {f(s['pg_x_floor'], 2)} "
            f"| {f(s['pg_commits_per_step'], 2)} |",
            f"| PostgreSQL's share (durable − in-memory) | {f(s['pg_share_us'])} "
            f"| {f(s['pg_share_x_floor'], 2)} | |",
            "| SQLite floor: plain `sqlite3`, WAL, `synchronous=NORMAL`, 2 commits/step "
            f"| {f(s['sqlite_floor_us'])} | 1.00 | 2 |",
            f"| loopwright, durable session on SQLite (`SQLiteLog`) "
            f"| {f(s['sqlite_durable_us'])} | {f(s['sqlite_x_floor'], 2)} | |",
            f"| SQLite's share (durable − in-memory) | {f(s['sqlite_share_us'])} "
            f"| {f(s['sqlite_share_x_floor'], 2)} | |",
            f"| loopwright, in-memory session (the loop alone) | {f(s['memory_us'])} | | |",
            "",
            f"A durable step on PostgreSQL costs {f(s['pg_x_sqlite'], 2)}× one on SQLite. "
            f"Failed or unchecked runs: {len(meta['failed'])}"
            + (f" ({', '.join(meta['failed'])})" if meta["failed"] else ""),
        ]
    )


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        sys.exit(child(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--steps", type=int, default=300, help="steps per run (default 300)")
    ap.add_argument("--url", help="a PostgreSQL server to use (default: start a private one)")
    ap.add_argument("--json", metavar="OUT", help="also write every run and the summary here")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per process")
    args = ap.parse_args()
    cluster = None
    if args.url is None:
        from pg_cluster import Cluster

        cluster = Cluster()
    try:
        url = args.url or cluster.start()  # type: ignore[union-attr]
        schemas = Schemas(url)
        load_start = os.getloadavg()[0]
        steps = str(args.steps)
        jobs = [[kind, steps] for kind in ("pgfloor", "pgdurable", "floor", "durable", "memory")]
        measure(["memory", "50"], schemas, args.timeout)  # uncounted: file cache, bytecode
        runs = []
        for i in range(args.n):
            for job in jobs:
                rec = measure(job, schemas, args.timeout) | {"round": i}
                runs.append(rec)
                print(f"[{i + 1}/{args.n}] {job[0]:9s} ok={rec['ok']} {rec.get('us_per_step')}")
                if not rec["ok"]:
                    print(rec.get("stderr_tail", rec.get("error", "")), file=sys.stderr)
        import psycopg

        with psycopg.connect(url) as db:
            row = db.execute("SHOW server_version").fetchone()
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "machine": durable.machine_line(),
            "git": durable.git_line(),
            "command": " ".join(["python bench/durable_pg.py", *sys.argv[1:]]),
            "load": [load_start, os.getloadavg()[0]],
            "n": args.n,
            "steps": args.steps,
            "server": row[0] if row else "?",
            "where": "--url" if args.url else "a private server, fsync on, loopback TCP",
            "failed": sorted({r["kind"] for r in runs if not r["ok"]}),
        }
    finally:
        if cluster is not None:
            cluster.stop()
    summary = summarise(runs)
    print("\n" + render(summary, meta))
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs}))


if __name__ == "__main__":
    main()
