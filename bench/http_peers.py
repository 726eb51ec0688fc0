"""`loopwright serve` against HTTP peers, LangGraph's and Google ADK's API servers, on the same
requests.

usage: python bench/http_peers.py [-n 200] [--deltas 1000] [--peers langgraph,adk] [--write]

The servers run on 127.0.0.1 at once, each a subprocess in a session of its own, with instant
fake models (bench/peers/http_servers.py: how each starts, its requests and checks):
`loopwright serve` on a throwaway project; `langgraph dev` (langgraph-cli[inmem], the in-memory
runtime) and `adk api_server` (google-adk, sessions in its local SQLite) from the peers'
virtualenvs (bench/peers/install.sh); a peer that is not installed is skipped with a note.
Requests, each answer checked:

    echo       one step: the model answers "ok"
    tool       the model calls a sync `ping` tool, then answers "done"
    stream     SSE: one answer streamed as --deltas text deltas: time to the first event and to
               the end of the stream, events/s as the client sees them
    8 clients  concurrent one-step requests (a connection each): requests/s

Sequential latency is p50/p99 over -n requests; server CPU per request is the utime + stime of
every process of the server's session, read from /proc before and after each block of requests,
less what the idle server spends meanwhile. Blocks rotate over the servers in rounds, so drift
spreads over all. `--write` replaces the "## HTTP peer" section of bench/RESULTS.md. Not a test:
there is no target.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _results import write_section
from run import git_rev, machine_line

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "peers"))
from http_servers import CONCURRENT_RUNS, SPECS, Spec, deltas_text  # noqa: E402

ROUNDS, WARMUP = 4, 20
IDLE_S = 10.0  # how long the idle servers' CPU is read (/proc counts in 10 ms ticks)
CLIENTS, EACH = 8, 50
assert CLIENTS == CONCURRENT_RUNS


@dataclass
class Server:
    spec: Spec
    url: str
    pid: int
    samples: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # CPU s, requests, wall s
    idle: float = 0.0  # CPU s per s of the idle server (its background loops)

    @property
    def name(self) -> str:
        return self.spec.name

    def check(self, kind: str, response: httpx.Response) -> None:
        if response.status_code != 200 or not self.spec.answer(kind, response.json()):
            raise RuntimeError(
                f"{self.name} {kind}: unexpected answer {response.status_code} "
                f"{response.text[:500]}"
            )

    @contextlib.contextmanager
    def metered(self, key: str, requests: int) -> Iterator[None]:
        """The server's CPU and the wall time around the block, added up under `key`."""
        cpu0, t0 = cpu_seconds(self.pid), time.perf_counter()
        yield
        wall, cpu = time.perf_counter() - t0, cpu_seconds(self.pid) - cpu0
        total = self.cpu.setdefault(key, [0.0, 0, 0.0])
        total[0], total[1], total[2] = total[0] + cpu, total[1] + requests, total[2] + wall

    def cpu_per_request(self, key: str) -> float:
        """Seconds of server CPU a request, less what the server spends idle in that time."""
        cpu, requests, wall = self.cpu[key]
        return (cpu - self.idle * wall) / requests


# ---- measuring


def cpu_seconds(session: int) -> float:
    """utime + stime (and reaped children's) of every process in the session `session`."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[3]) == session:  # field 6, the session id
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def stream_once(server: Server, c: httpx.Client, deltas: int) -> tuple[float, float, int]:
    """(seconds to the first event, seconds to the end of the stream, events), the deltas
    checked against the text."""
    t0 = time.perf_counter()
    first, events, got = 0.0, 0, []
    event, data = "", []
    path, body = server.spec.request("stream")
    with c.stream("POST", path, json=body) as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and (event or data):  # the end of a frame
                first = first or time.perf_counter() - t0
                events += 1
                delta = server.spec.delta(event, "\n".join(data))
                if delta is not None:
                    got.append(delta)
                event, data = "", []
    end = time.perf_counter() - t0
    if r.status_code != 200 or "".join(got) != deltas_text(deltas) or len(got) != deltas:
        raise RuntimeError(f"{server.name} stream: status {r.status_code}, {len(got)} deltas")
    return first, end, events


def block(server: Server, c: httpx.Client, kind: str, n: int, deltas: int) -> None:
    """`n` sequential requests of one kind, timed, with the server's CPU around them."""
    add = lambda key, values: server.samples.setdefault(key, []).extend(values)  # noqa: E731
    if kind == "stream":
        with server.metered("end", n):
            runs = [stream_once(server, c, deltas) for _ in range(n)]
        add("first", [r[0] for r in runs])
        add("end", [r[1] for r in runs])
        add("events/s", [r[2] / r[1] for r in runs])  # over the whole stream
        add("delivery", [(r[2] - 1) / (r[1] - r[0]) for r in runs])  # after the first event
        add("events", [float(r[2]) for r in runs])
        return
    times = []
    with server.metered(kind, n):
        for _ in range(n):
            path, body = server.spec.request(kind)
            t0 = time.perf_counter()
            response = c.post(path, json=body)
            times.append(time.perf_counter() - t0)
            server.check(kind, response)
    add(kind, times)


async def concurrent(server: Server) -> None:
    """Requests/s of CLIENTS clients (a connection each) sending EACH one-step requests."""
    ready = asyncio.Barrier(CLIENTS + 1)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            for i in range(EACH + 1):
                path, body = server.spec.request("echo")
                server.check("echo", await c.post(path, json=body))
                if i == 0:  # a warm connection, then all start together
                    await ready.wait()

    tasks = [asyncio.create_task(client()) for _ in range(CLIENTS)]
    await ready.wait()
    with server.metered("rps", CLIENTS * EACH):
        t0 = time.perf_counter()
        await asyncio.gather(*tasks)
        seconds = time.perf_counter() - t0
    server.samples["rps"] = [CLIENTS * EACH / seconds]


def measure(servers: list[Server], n: int, deltas: int) -> None:
    clients = {s.name: httpx.Client(base_url=s.url, timeout=120) for s in servers}
    streams = max(ROUNDS, n // 4)
    try:
        for s in servers:  # uncounted: connections, imports, caches
            for kind in ("echo", "tool"):
                block(s, clients[s.name], kind, WARMUP, deltas)
            block(s, clients[s.name], "stream", 2, deltas)
            s.samples.clear()
            s.cpu.clear()
        idle0 = [cpu_seconds(s.pid) for s in servers]  # all idle: their background work
        time.sleep(IDLE_S)
        for s, cpu0 in zip(servers, idle0, strict=True):
            s.idle = (cpu_seconds(s.pid) - cpu0) / IDLE_S
        for i in range(ROUNDS):  # each round: every kind on every server, the order rotating
            print(f"{time.strftime('%H:%M:%S')} round {i + 1}/{ROUNDS}", file=sys.stderr)
            for kind, count in (("echo", n), ("tool", n), ("stream", streams)):
                for s in servers[i % len(servers) :] + servers[: i % len(servers)]:
                    block(s, clients[s.name], kind, count // ROUNDS, deltas)
        print(f"{time.strftime('%H:%M:%S')} {CLIENTS} clients", file=sys.stderr)
        for s in servers:
            asyncio.run(concurrent(s))
    finally:
        for c in clients.values():
            c.close()


# ---- the servers' processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(argv: list[str], cwd: Path, env: dict[str, str], health: str) -> Iterator[int]:
    """Runs `argv` in a session of its own until the block ends; yields its pid once `health`
    answers 200."""
    log = cwd / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            argv, cwd=cwd, env=os.environ | env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while server.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(health, timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"{argv[0]} did not start:\n{log.read_text()[-3000:]}")
        yield server.pid
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def versions(spec: Spec) -> str:
    if spec.python is None:
        return f"loopwright git {git_rev()}"
    code = "import sys; from importlib.metadata import version as v; "
    code += "print(', '.join(f'{d} {v(d)}' for d in sys.argv[1:]))"
    p = subprocess.run(
        [str(spec.python), "-c", code, *spec.versions], capture_output=True, text=True, timeout=60
    )
    return p.stdout.strip() if p.returncode == 0 else "?"


# ---- the table


def render(servers: list[Server], meta: dict) -> str:
    lw = servers[0]
    deltas = meta["deltas"]

    def pct(s: Server, key: str, q: int) -> float:
        values = s.samples[key]
        return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]

    def times(a: float, b: float) -> str:
        return f"{a / b:.1f}" if b > 0 else "–"

    def rows(what: str, key: str, cpu: bool) -> list[str]:
        out = []
        for s in servers:
            p50, p99 = pct(s, key, 50), pct(s, key, 99)
            c = s.cpu_per_request(key) if cpu else 0.0
            cells = [
                what if s is lw else "",
                s.name,
                f"{p50 * 1e3:.2f}",
                f"{p99 * 1e3:.2f}",
                f"{c * 1e3:.2f}" if cpu else "",
                "" if s is lw else times(p50, pct(lw, key, 50)),
                "" if s is lw or not cpu else times(c, lw.cpu_per_request(key)),
            ]
            out.append("| " + " | ".join(cells) + " |")
        return out

    def median(s: Server, key: str) -> float:
        return statistics.median(s.samples[key])

    n, streams = len(lw.samples["echo"]), len(lw.samples["end"])
    lines = [
        "## HTTP peer",
        "",
        f"Date: {meta['date']}  ",
        f"Machine: {machine_line()}; /proc/loadavg {meta['load_before']} before, "
        f"{meta['load_after']} after  ",
        *(f"{s.name}: {meta['versions'][s.name]}  " for s in servers),
        f"`{meta['command']}`: the servers on 127.0.0.1 at once, instant fake models, the httpx "
        f"client in another process; {ROUNDS} rounds rotating over the servers after {WARMUP} "
        "uncounted requests of each kind; each request a new session (loopwright: in its SQLite "
        "event log; ADK: in its local SQLite; LangGraph: a stateless run, its thread in memory). "
        "LangGraph's latency is mostly its run queue's poll (the in-memory runtime's `Runs.next` "
        "sleeps 0.5 s when it found no run); its CPU is not. Server CPU: utime + stime of the "
        "server's processes from /proc around each block, less the idle server's. "
        "See bench/README.md.",
        "",
        "| request | server | p50 ms | p99 ms | server CPU ms/req | p50 × loopwright "
        "| CPU × loopwright |",
        "|---|---|--:|--:|--:|--:|--:|",
        *rows(f'one step ("ok"), n={n}', "echo", True),
        *rows(f'tool step (sync `ping`, then "done"), n={n}', "tool", True),
        *rows(f"SSE, {deltas:,} deltas: first event, n={streams}", "first", False),
        *rows(f"SSE, {deltas:,} deltas: end of the stream (CPU: a stream)", "end", True),
        "",
        f"| server | SSE events a stream | SSE events/s, client-observed | the same after the "
        f"first event | SSE server CPU µs/delta | {CLIENTS} clients × {EACH} one-step requests: "
        "requests/s | server CPU ms/req | idle server CPU ms/s |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in servers:
        per_delta = s.cpu_per_request("end") / deltas * 1e6
        rps, cpu = s.samples["rps"][0], s.cpu_per_request("rps") * 1e3
        if s is not lw:
            lw_delta = lw.cpu_per_request("end") / deltas * 1e6
            lw_rps, lw_cpu = lw.samples["rps"][0], lw.cpu_per_request("rps") * 1e3
            per_delta_s = f"{per_delta:.1f} ({times(per_delta, lw_delta)} ×)"
            rps_s, cpu_s = (
                f"{rps:,.0f} ({rps / lw_rps:.2f} ×)",
                f"{cpu:.2f} ({times(cpu, lw_cpu)} ×)",
            )
        else:
            per_delta_s, rps_s, cpu_s = f"{per_delta:.1f}", f"{rps:,.0f}", f"{cpu:.2f}"
        cells = [
            s.name,
            f"{median(s, 'events'):,.0f}",
            f"{median(s, 'events/s'):,.0f}",
            f"{median(s, 'delivery'):,.0f}",
            per_delta_s,
            rps_s,
            cpu_s,
            f"{s.idle * 1e3:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="timed requests of each kind (default 200)")
    ap.add_argument("--deltas", type=int, default=1000, help="text deltas of the SSE answer")
    ap.add_argument("--peers", default="langgraph,adk", help="comma list of langgraph, adk")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    specs = [SPECS["loopwright"]]
    for name in filter(None, args.peers.split(",")):
        if name not in SPECS or name == "loopwright":
            ap.error(f"unknown peer {name!r}")
        if SPECS[name].installed():
            specs.append(SPECS[name])
        else:
            print(f"note: {name} is not installed, skipped (bench/peers/install.sh)", flush=True)
    os.environ.pop("LOOPWRIGHT_HOME", None)  # the store lives in the throwaway project
    load_before = loadavg()
    with (
        tempfile.TemporaryDirectory(prefix="loopwright-http-peers-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        servers = []
        for spec in specs:
            root, port = Path(tmp) / spec.name, free_port()
            root.mkdir()
            argv, env = spec.start(root, port, args.deltas)
            url = f"http://127.0.0.1:{port}"
            pid = stack.enter_context(serving(argv, root, env, url + spec.health))
            servers.append(Server(spec, url, pid))
        measure(servers, args.n, args.deltas)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load_before": load_before,
        "load_after": loadavg(),
        "versions": {s.name: versions(s.spec) for s in servers},
        "deltas": args.deltas,
        "command": " ".join(["python bench/http_peers.py", *sys.argv[1:]]),
    }
    section = render(servers, meta)
    print(section, end="")
    if args.write:
        write_section("## HTTP peer", section)


if __name__ == "__main__":
    main()
