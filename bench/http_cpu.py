"""The server's CPU against its floors (issue 32 goal 3), from the repo alone.

usage: python bench/http_cpu.py [-n 2000] [--runs 20] [--streams 1000] [--every 0.05]
                                [--only post,sse,health] [--instructions]

Server CPU is the server process's own user + system time (`/proc/PID/stat`, every thread,
clock ticks) across the timed requests and a short settle after them, divided by the work done;
the client runs in this process, so its CPU is not counted. `--instructions` measures post and
sse instead in instructions (valgrind's callgrind, every thread): each server runs under
callgrind twice, serving a small and a large count of the same requests, then stopped with
SIGINT; the difference over the requests between is per request (start-up and shutdown cancel
out). Minutes, but the machine's load does not move it. `/proc/loadavg` goes with every figure.

- **post**: `POST /agents/echo/messages` (one step, instant model, a new session each) against a
  bare Starlette endpoint (reads the JSON body, answers a JSON object) served the same way
  (uvicorn, the same httptools protocol with `serve_config`'s deadlines, 127.0.0.1), in the same
  run, the same client (httpx, one kept-alive connection, sequential requests); and the same
  run in-process (`Runtime.send` to its `done`): the part of the request that is the run.
- **sse**: `POST /agents/deltas/messages/stream`, a run streaming DELTAS text deltas, server CPU
  per delta, against the in-process stream (`Runtime.send(hold=True)` and `LiveRun.stream()` on
  the same kind of event log; that process's CPU time).
- **health**: `GET /health` latency (p50, p99, max) from one kept-alive connection, a request
  every 5 ms, while STREAMS clients each stream a run of the `slow` agent (SLOW_DELTAS deltas,
  `--every` seconds apart) at once, over raw sockets; every frame of every stream is counted;
  idle first, for comparison; with the server's CPU over the streams' wall time (1.0: one core
  busy all along, the loop saturated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

HEAD = """\
from loopwright import Agent
from loopwright.messages import Usage
from loopwright.testing import FunctionModel, Reply

USAGE = Usage(input_tokens=10, output_tokens=1)  # so that no token estimate runs
"""
DELTAS = 500
FILES = {
    "echo/agent.py": HEAD
    + 'agent = Agent(name="echo", model=FunctionModel(lambda _: Reply(text="ok", usage=USAGE)))\n',
    "deltas/agent.py": HEAD
    + f'agent = Agent(name="deltas", model=FunctionModel(lambda _: Reply(text="abcd" * {DELTAS},'
    " chunk=4, usage=USAGE)))\n",
}
SLOW = (
    'agent = Agent(name="slow", model=FunctionModel(lambda _: Reply(text="abcd" * {n},'
    " chunk=4, delay={every}, usage=USAGE)))\n"
)
SLOW_DELTAS = 100
TOML = """\
[server]
max_connections = 5000
max_runs_per_tenant = 5000
max_streams_per_tenant = 5000
request_timeout = 120
idle_timeout = 120
"""
BARE = """\
import sys
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
import uvicorn
from loopwright.server import ServerSettings
from loopwright.server.limits import serve_config

async def echo(request: Request) -> JSONResponse:
    data = await request.json()
    return JSONResponse({"text": "ok", "message": data["message"]})

app = Starlette(routes=[Route("/agents/echo/messages", echo, methods=["POST"])])
config = serve_config(app, ServerSettings(), host="127.0.0.1", port=int(sys.argv[1]),
                      log_level="warning", lifespan="off")
uvicorn.Server(config).run()
"""
TICK = os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process (all its threads, living and ended)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def healthy(
    url: str, server: subprocess.Popen[bytes], *, within: float, poll: float, timeout: float
) -> bool:
    """Whether the server at `url` answers `/health` within `within` seconds (polled every
    `poll`; False as soon as its process ends)."""
    deadline = time.monotonic() + within
    while server.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=timeout)
            return True
        time.sleep(poll)
    return False


@contextlib.contextmanager
def started(argv: list[str], port: int, cwd: Path) -> Iterator[tuple[str, int]]:
    """A server subprocess until the block ends: its URL and pid once /health (or any route)
    answers."""
    log = cwd / f"server-{port}.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with log.open("wb") as out:
        server = subprocess.Popen(
            argv, cwd=cwd, stdout=out, stderr=out, start_new_session=True, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if not healthy(url, server, within=60, poll=0.05, timeout=1):
            raise RuntimeError(f"the server did not start:\n{log.read_text()}")
        yield url, server.pid
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def loopwright(root: Path) -> contextlib.AbstractContextManager[tuple[str, int]]:
    port = free_port()
    argv = [sys.executable, "-c", "from loopwright.cli.main import main; main()", "serve"]
    argv += ["--project", str(root), "--host", "127.0.0.1", "--port", str(port)]
    return started(argv, port, root)


def bare(root: Path) -> contextlib.AbstractContextManager[tuple[str, int]]:
    port = free_port()
    return started([sys.executable, "-c", BARE, str(port)], port, root)


def make_project(root: Path, every: float = 0.05) -> None:
    """The project: `echo`, `deltas`, and `slow` (SLOW_DELTAS deltas, `every` seconds apart)."""
    (root / "loopwright.toml").write_text(TOML)
    files = {**FILES, "slow/agent.py": HEAD + SLOW.format(n=SLOW_DELTAS, every=every)}
    for name, text in files.items():
        path = root / "agents" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def settle(pid: int) -> float:
    """The server's CPU once it has been idle a moment (what a run does after its answer)."""
    time.sleep(0.5)
    return cpu_seconds(pid)


def post_cpu(url: str, pid: int | None, n: int, warmup: int = 100) -> float:
    """Server CPU seconds per one-step POST (with no `pid`, just the requests)."""
    with httpx.Client(base_url=url, timeout=60) as client:

        def once() -> None:
            r = client.post("/agents/echo/messages", json={"message": "hi"})
            if r.status_code != 200 or r.json().get("text") != "ok":
                raise RuntimeError(f"unexpected answer {r.status_code} {r.text[:200]}")

        for _ in range(warmup):
            once()
        before = settle(pid) if pid else 0.0
        for _ in range(n):
            once()
        return (settle(pid) - before) / n if pid else 0.0


def sse_cpu(url: str, pid: int | None, runs: int, warmup: int = 3) -> float:
    """Server CPU seconds per text delta, streaming `deltas` runs."""
    with httpx.Client(base_url=url, timeout=60) as client:

        def once() -> None:
            body = b""
            with client.stream(
                "POST", "/agents/deltas/messages/stream", json={"message": "hi"}
            ) as r:
                for chunk in r.iter_bytes():
                    body += chunk
            count = body.count(b"event: text:delta\n")
            if r.status_code != 200 or count != DELTAS or b"event: done\n" not in body:
                raise RuntimeError(f"stream: status {r.status_code}, {count} deltas")

        for _ in range(warmup):
            once()
        before = settle(pid) if pid else 0.0
        for _ in range(runs):
            once()
        return (settle(pid) - before) / (runs * DELTAS) if pid else 0.0


async def in_process_post(root: Path, n: int, warmup: int = 10) -> float:
    """CPU seconds per one-step run of `echo` in-process (`Runtime.send`, to its `done`), on the
    same kind of event log: what the route itself starts, without HTTP."""
    from loopwright.project import load_project
    from loopwright.runtime import Runtime
    from loopwright.store import open_log

    project = load_project(root)
    log = await open_log(root / f"in-process-{os.getpid()}.db")
    runtime = Runtime(project.agents, log)

    async def once() -> None:
        done = await (await runtime.send("default", "echo", None, "hi")).wait()
        if done is None or done.text != "ok":
            raise RuntimeError(f"in-process: unexpected end {done!r}")

    try:
        for _ in range(warmup):
            await once()
        t0 = time.process_time()
        for _ in range(n):
            await once()
        return (time.process_time() - t0) / n
    finally:
        await runtime.close()
        await log.close()


async def in_process_sse(root: Path, runs: int, warmup: int = 3) -> float:
    """CPU seconds per text delta of the same runs streamed in-process."""
    from loopwright.project import load_project
    from loopwright.runtime import Runtime
    from loopwright.store import open_log

    project = load_project(root)
    log = await open_log(root / f"in-process-{os.getpid()}.db")
    runtime = Runtime(project.agents, log)

    async def once() -> None:
        live = await runtime.send("default", "deltas", None, "hi", hold=True)
        count = 0
        async for _, event in live.stream():
            count += event.type == "text:delta"
        if count != DELTAS:
            raise RuntimeError(f"in-process: {count} deltas")

    try:
        for _ in range(warmup):
            await once()
        t0 = time.process_time()
        for _ in range(runs):
            await once()
        return (time.process_time() - t0) / (runs * DELTAS)
    finally:
        await runtime.close()
        await log.close()


REQUEST = (
    b"POST /agents/slow/messages/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 17\r\nConnection: close\r\n\r\n"
    b'{"message": "hi"}'
)


async def one_stream(port: int, frames: list[int]) -> None:
    """One SSE run read to its end (the connection closes after it): its frames counted."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(REQUEST)
        data = await reader.read()  # to EOF (Connection: close)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"stream refused: {head[:200]!r}")
    frames.append(body.count(b"event: text:delta\n") + 100 * body.count(b"event: done\n"))


async def health_latencies(url: str, stop: asyncio.Event | None, n: int) -> list[float]:
    """Seconds per `GET /health`, one after another, until `stop` (or `n` of them)."""
    out: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while (stop is None and len(out) < n) or (stop is not None and not stop.is_set()):
            t0 = time.perf_counter()
            r = await client.get("/health")
            out.append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise RuntimeError(f"/health: {r.status_code}")
            await asyncio.sleep(0.005)
    return out


async def health_under_streams(
    url: str, port: int, streams: int, pid: int
) -> tuple[list[float], int, float]:
    """/health latencies while `streams` SSE runs go at once; the streams that lost a frame;
    the server's CPU seconds per wall second meanwhile."""
    frames: list[int] = []
    stop = asyncio.Event()
    pinger = asyncio.create_task(health_latencies(url, stop, 0))
    await asyncio.sleep(0.2)
    cpu, t0 = cpu_seconds(pid), time.monotonic()
    clients = [asyncio.create_task(one_stream(port, frames)) for _ in range(streams)]
    await asyncio.gather(*clients)
    busy = (cpu_seconds(pid) - cpu) / (time.monotonic() - t0)
    stop.set()
    latencies = await pinger
    complete = SLOW_DELTAS + 100  # every delta and the done
    return latencies, sum(1 for f in frames if f != complete) + streams - len(frames), busy


def total(path: Path) -> int:
    """The total instruction count of a callgrind profile (every thread)."""
    found = re.search(r"^(?:totals|summary): (\d+)", path.read_text(), re.M)
    if found is None:
        raise RuntimeError(f"no totals in {path}")
    return int(found.group(1))


def under_callgrind(argv: list[str], out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}", *argv]


def server_instructions(kind: str, root: Path, work: Callable[[str, int], None]) -> int:
    """Instructions of a whole server process (`loopwright` or `bare`, under callgrind) that
    served `work(url, pid)` and was then stopped with SIGINT."""
    port = free_port()
    if kind == "bare":
        argv = [sys.executable, "-c", BARE, str(port)]
    else:
        argv = [sys.executable, "-c", "from loopwright.cli.main import main; main()", "serve"]
        argv += ["--project", str(root), "--host", "127.0.0.1", "--port", str(port)]
    out = root / f"cg.{kind}.{port}.out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONHASHSEED": "0"}
    log = (root / f"cg-{port}.log").open("wb")
    server = subprocess.Popen(under_callgrind(argv, out), cwd=root, stdout=log, stderr=log, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        if not healthy(url, server, within=600, poll=0.5, timeout=30):
            raise RuntimeError(f"the server did not start under callgrind (see {log.name})")
        work(url, server.pid)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=300)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    return total(out)


def per_unit(measure: Callable[[int], int], small: int, large: int, units: int) -> float:
    """Instructions per unit: `measure(large) - measure(small)` over the units between them
    (start-up and shutdown cancel out)."""
    return (measure(large) - measure(small)) / units


def instructions(root: Path, n: int, runs: int) -> None:
    """The post and sse measures in instructions (callgrind), see the module docstring."""

    def posts(kind: str, count: int) -> int:
        return server_instructions(kind, root, lambda url, _: post_cpu(url, None, count, 10))

    small = max(10, n // 5)
    floor = per_unit(lambda k: posts("bare", k), small, n + small, n)
    ours = per_unit(lambda k: posts("loopwright", k), small, n + small, n)
    print(f"bare Starlette POST: {floor / 1e3:,.0f} k instructions  [load {loadavg()}]")
    print(f"loopwright one-step POST: {ours / 1e3:,.0f} k instructions  [load {loadavg()}]")
    print(f"  ratio {ours / floor:.2f} x (instructions, {n} requests each)")

    def streams(count: int) -> int:
        return server_instructions("loopwright", root, lambda url, _: sse_cpu(url, None, count, 1))

    def inproc(count: int, what: str = "sse") -> int:
        out = root / f"cg.inproc.{what}.{count}.out"
        argv = [sys.executable, __file__, "--child-inproc", what, str(count), str(root)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONHASHSEED": "0"}
        subprocess.run(under_callgrind(argv, out), check=True, env=env, capture_output=True)
        return total(out)

    run = per_unit(lambda k: inproc(k, "post"), small, n + small, n)
    print(f"  (the same run in-process, no HTTP: {run / 1e3:,.0f} k instructions)")
    deltas = runs * DELTAS
    base = per_unit(inproc, 1, runs + 1, deltas)
    sse = per_unit(streams, 1, runs + 1, deltas)
    print(f"in-process stream: {base / 1e3:.1f} k instructions per delta  [load {loadavg()}]")
    print(f"SSE: {sse / 1e3:.1f} k instructions per delta  [load {loadavg()}]")
    print(f"  ratio {sse / base:.2f} x (instructions, {runs} runs x {DELTAS} deltas)")


def ms(samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=100)
    return (
        f"p50 {statistics.median(samples) * 1e3:.1f} ms, p99 {q[98] * 1e3:.1f} ms, "
        f"max {max(samples) * 1e3:.1f} ms (n={len(samples)})"
    )


def main() -> None:
    if sys.argv[1:2] == ["--child-inproc"]:  # (under callgrind: `instructions`)
        what, count, root = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
        child = in_process_sse(root, count, 1) if what == "sse" else in_process_post(root, count)
        asyncio.run(child)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="timed POSTs each (default 2000)")
    ap.add_argument("--runs", type=int, default=20, help=f"SSE runs of {DELTAS} deltas (20)")
    ap.add_argument("--streams", type=int, default=1000, help="concurrent SSE runs (1000)")
    ap.add_argument(
        "--every", type=float, default=0.05, help="seconds between a slow run's deltas (0.05)"
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="post and sse in instructions under callgrind (minutes), not CPU time",
    )
    ap.add_argument("--only", default="post,sse,health", help="which measures (comma-separated)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    os.environ.pop("LOOPWRIGHT_HOME", None)  # the store lives in the throwaway project
    with tempfile.TemporaryDirectory(prefix="loopwright-http-cpu-") as tmp:
        root = Path(tmp)
        make_project(root, args.every)
        if args.instructions:
            instructions(root, args.n, args.runs)
            return
        if "post" in only:
            with bare(root) as (url, pid):
                floor = post_cpu(url, pid, args.n)
            print(f"bare Starlette POST: {floor * 1e6:,.0f} us server CPU  [load {loadavg()}]")
            with loopwright(root) as (url, pid):
                ours = post_cpu(url, pid, args.n)
            print(f"loopwright one-step POST: {ours * 1e6:,.0f} us server CPU  [load {loadavg()}]")
            print(f"  ratio {ours / floor:.2f} x (n={args.n} each)")
            run = asyncio.run(in_process_post(root, args.n))
            print(f"  (the same run in-process, no HTTP: {run * 1e6:,.0f} us CPU)")
        if "sse" in only:
            inproc = asyncio.run(in_process_sse(root, args.runs))
            print(f"in-process stream: {inproc * 1e6:.2f} us CPU per delta  [load {loadavg()}]")
            with loopwright(root) as (url, pid):
                ours = sse_cpu(url, pid, args.runs)
            print(f"SSE: {ours * 1e6:.2f} us server CPU per delta  [load {loadavg()}]")
            print(f"  ratio {ours / inproc:.2f} x ({args.runs} runs x {DELTAS} deltas)")
        if "health" in only:
            port = free_port()
            argv = [sys.executable, "-c", "from loopwright.cli.main import main; main()"]
            argv += ["serve", "--project", str(root), "--host", "127.0.0.1", "--port", str(port)]
            with started(argv, port, root) as (url, pid):
                idle = asyncio.run(health_latencies(url, None, 200))
                print(f"/health idle: {ms(idle)}  [load {loadavg()}]")
                got = asyncio.run(health_under_streams(url, port, args.streams, pid))
                print(
                    f"/health during {args.streams} SSE runs ({SLOW_DELTAS} deltas, one every "
                    f"{args.every} s): {ms(got[0])}  [load {loadavg()}]; streams missing a "
                    f"frame: {got[1]}; server CPU {got[2]:.2f} s per second"
                )


if __name__ == "__main__":
    main()
