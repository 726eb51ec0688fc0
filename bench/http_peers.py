"""`loopwright serve` against an HTTP peer, LangGraph's API server, on the same requests.

usage: python bench/http_peers.py [-n 200] [--deltas 1000] [--write]

Both servers run on 127.0.0.1 at once, each a subprocess in a session of its own, with instant
fake models: loopwright serve on a throwaway project (bench/http_bench.py's `echo` and `tool`
agents, plus `stream`), and `langgraph dev --no-browser --no-reload` (langgraph-cli[inmem]:
the in-memory runtime) on a throwaway graph project whose chat model is a fake class of the
graph's own. The peer comes from the peers' virtualenv (bench/peers/install.sh; or
$LOOPWRIGHT_PEERS_VENV). Requests, each checked:

    one step   the model answers "ok"
    tool step  the model calls a sync `ping` tool, then answers "done"
    SSE        one answer streamed as --deltas text deltas: time to the first event and to the
               end of the stream, events/s as the client sees them
    8 clients  concurrent one-step requests (a connection each): requests/s

Sequential latency is p50/p99 over -n requests; server CPU per request is the utime + stime
(of the server's process, its threads and any children: every process of its session) read
from /proc before and after each block. Blocks alternate between the servers in rounds, so
drift spreads over both. `--write` replaces the "## HTTP peer" section of bench/RESULTS.md.
Not a test: there is no target.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _results import write_section
from http_bench import FILES, HEAD, make_project
from run import PEER_PYTHON, PEERS_VENV, git_rev, machine_line

BENCH = Path(__file__).resolve().parent
TOKENS = [f"{n % 1000:03d} " for n in range(100_000)]  # 4 characters a delta, as scenario D
ROUNDS, WARMUP = 4, 20
IDLE_S = 10.0  # how long the idle servers' CPU is read (/proc counts in 10 ms ticks)
CLIENTS, EACH = 8, 50
HI = "hi"

STREAM_AGENT = """
DELTAS = int(Path(__file__).with_name("deltas").read_text())
TEXT = "".join(f"{n % 1000:03d} " for n in range(DELTAS))
agent = Agent(name="stream", model=FunctionModel(lambda _: Reply(text=TEXT, chunk=4, usage=USAGE)))
"""

GRAPHS = '''"""Three graphs for the benchmark, the prebuilt ReAct agent over a fake chat model."""

import warnings
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

DELTAS = int(Path(__file__).with_name("deltas").read_text())
PING = {"name": "ping", "args": {}, "id": "p1", "type": "tool_call"}


class Fake(BaseChatModel):
    """"ok"; or a `ping` call, then "done"; or DELTAS streamed deltas of 4 characters."""

    kind: str

    @property
    def _llm_type(self):
        return "bench-fake"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.kind == "tool" and not isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="", tool_calls=[PING])
        else:
            reply = AIMessage(content="done" if self.kind == "tool" else "ok")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._generate(messages)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        for n in range(DELTAS):
            token = f"{n % 1000:03d} "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


def ping() -> str:
    """Answer pong."""
    return "pong"


echo = create_react_agent(Fake(kind="echo"), [])
tool = create_react_agent(Fake(kind="tool"), [ping])
stream = create_react_agent(Fake(kind="stream"), [])
'''
LANGGRAPH_JSON = {
    "dependencies": ["."],
    "graphs": {g: f"./graphs.py:{g}" for g in ("echo", "tool", "stream")},
}
# langgraph dev runs one job at a time by default; 8 lets the 8 clients' runs go at once
# (loopwright serve has no such limit). No analytics, no LangSmith tracing: nothing leaves.
LANGGRAPH_ARGS = ["dev", "--no-browser", "--no-reload", "--n-jobs-per-worker", str(CLIENTS)]
QUIET = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
PEER_VERSIONS = (
    "langgraph-cli",
    "langgraph-api",
    "langgraph-runtime-inmem",
    "langgraph",
    "langchain-core",
    "uvicorn",
)


# ---- the two servers: the same requests, each answer checked


@dataclass
class Server:
    name: str
    url: str
    pid: int
    one: Callable[[httpx.Client], None]
    tool: Callable[[httpx.Client], None]
    stream: tuple[str, dict]  # path, body
    delta: Callable[[str, str], str | None]  # (event, data) -> the delta, or None
    one_async: Callable[[httpx.AsyncClient], object]
    samples: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # CPU s, requests, wall s
    idle: float = 0.0  # CPU s per s of the idle server (its background loops)

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


def expect(ok: bool, what: str, response: httpx.Response) -> None:
    if response.status_code != 200 or not ok:
        raise RuntimeError(
            f"{what}: unexpected answer {response.status_code} {response.text[:500]}"
        )


def lw_check(agent: str, answer: str) -> Callable[[httpx.Response], None]:
    def check(r: httpx.Response) -> None:
        body = r.json() if r.status_code == 200 else {}
        ok = body.get("text") == answer
        if agent == "tool":
            ok = ok and any(e["type"] == "tool:result" for e in body["events"])
        expect(ok, f"loopwright {agent}", r)

    return check


def lg_check(graph: str, answer: str) -> Callable[[httpx.Response], None]:
    def check(r: httpx.Response) -> None:
        messages = r.json().get("messages", []) if r.status_code == 200 else []
        ok = bool(messages) and messages[-1].get("content") == answer
        if graph == "tool":
            ok = ok and any(m["type"] == "tool" and m["content"] == "pong" for m in messages)
        expect(ok, f"langgraph {graph}", r)

    return check


def lw_body(agent: str) -> tuple[str, dict]:
    return f"/agents/{agent}/messages", {"message": HI}


def lg_body(graph: str) -> tuple[str, dict]:
    """A stateless run (`/runs/wait`: a thread made for the run and deleted after it), as each
    loopwright message here opens a new session."""
    return "/runs/wait", {
        "assistant_id": graph,
        "input": {"messages": [{"role": "user", "content": HI}]},
    }


def sync_post(body: tuple[str, dict], check: Callable[[httpx.Response], None]):
    return lambda c: check(c.post(body[0], json=body[1]))


def async_post(body: tuple[str, dict], check: Callable[[httpx.Response], None]):
    async def post(c: httpx.AsyncClient) -> None:
        check(await c.post(body[0], json=body[1]))

    return post


def lw_delta(event: str, data: str) -> str | None:
    return json.loads(data)["delta"] if event == "text:delta" else None


def lg_delta(event: str, data: str) -> str | None:
    if event != "messages":
        return None
    chunk = json.loads(data)[0]
    return chunk["content"] if chunk.get("type") == "AIMessageChunk" and chunk["content"] else None


def loopwright_server(url: str, pid: int) -> Server:
    return Server(
        "loopwright",
        url,
        pid,
        one=sync_post(lw_body("echo"), lw_check("echo", "ok")),
        tool=sync_post(lw_body("tool"), lw_check("tool", "done")),
        stream=("/agents/stream/messages/stream", {"message": HI}),
        delta=lw_delta,
        one_async=async_post(lw_body("echo"), lw_check("echo", "ok")),
    )


def langgraph_server(url: str, pid: int) -> Server:
    _, body = lg_body("stream")
    return Server(
        "langgraph",
        url,
        pid,
        one=sync_post(lg_body("echo"), lg_check("echo", "ok")),
        tool=sync_post(lg_body("tool"), lg_check("tool", "done")),
        stream=("/runs/stream", body | {"stream_mode": "messages-tuple"}),
        delta=lg_delta,
        one_async=async_post(lg_body("echo"), lg_check("echo", "ok")),
    )


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
    with c.stream("POST", server.stream[0], json=server.stream[1]) as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and (event or data):  # the end of a frame
                first = first or time.perf_counter() - t0
                events += 1
                delta = server.delta(event, "\n".join(data))
                if delta is not None:
                    got.append(delta)
                event, data = "", []
    end = time.perf_counter() - t0
    if r.status_code != 200 or "".join(got) != "".join(TOKENS[:deltas]) or len(got) != deltas:
        raise RuntimeError(f"{server.name} stream: status {r.status_code}, {len(got)} deltas")
    return first, end, events


def block(server: Server, c: httpx.Client, kind: str, n: int, deltas: int) -> None:
    """`n` sequential requests of one kind, timed, with the server's CPU around them."""
    if os.environ.get("HTTP_PEERS_TRACE"):
        print(f"{time.strftime('%H:%M:%S')} {server.name} {kind} x{n}", flush=True)
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
    once = server.one if kind == "one" else server.tool
    times = []
    with server.metered(kind, n):
        for _ in range(n):
            t0 = time.perf_counter()
            once(c)
            times.append(time.perf_counter() - t0)
    add(kind, times)


async def concurrent(server: Server) -> None:
    """Requests/s of CLIENTS clients (a connection each) sending EACH one-step requests."""
    ready = asyncio.Barrier(CLIENTS + 1)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            for i in range(EACH + 1):
                await server.one_async(c)
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
            for kind in ("one", "tool"):
                block(s, clients[s.name], kind, WARMUP, deltas)
            block(s, clients[s.name], "stream", 2, deltas)
            s.samples.clear()
            s.cpu.clear()
        idle0 = [cpu_seconds(s.pid) for s in servers]  # both idle: their background work
        time.sleep(IDLE_S)
        for s, cpu0 in zip(servers, idle0, strict=True):
            s.idle = (cpu_seconds(s.pid) - cpu0) / IDLE_S
        for i in range(ROUNDS):  # each round: every kind on both servers, the order alternating
            for kind, count in (("one", n), ("tool", n), ("stream", streams)):
                for s in servers if i % 2 == 0 else servers[::-1]:
                    block(s, clients[s.name], kind, count // ROUNDS, deltas)
        for s in servers if ROUNDS % 2 == 0 else servers[::-1]:
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


def loopwright_argv(port: int, root: Path) -> tuple[list[str], dict[str, str]]:
    exe = Path(sys.executable).with_name("loopwright")
    argv = [str(exe) if exe.exists() else "loopwright", "serve", "--project", str(root)]
    src = str(BENCH.parent / "src")  # this checkout's loopwright, whatever the venv installed
    path = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    return [*argv, "--host", "127.0.0.1", "--port", str(port)], {"PYTHONPATH": path}


def make_projects(root: Path, deltas: int) -> tuple[Path, Path]:
    lw, lg = root / "loopwright", root / "langgraph"
    lw.mkdir()
    lg.mkdir()
    make_project(lw)
    (lw / "agents" / "stream").mkdir()
    (lw / "agents" / "stream" / "agent.py").write_text(HEAD + STREAM_AGENT)
    (lw / "agents" / "stream" / "deltas").write_text(str(deltas))
    assert "echo/agent.py" in FILES and "tool/agent.py" in FILES
    (lg / "graphs.py").write_text(GRAPHS)
    (lg / "deltas").write_text(str(deltas))
    (lg / "langgraph.json").write_text(json.dumps(LANGGRAPH_JSON))
    return lw, lg


def peer_versions() -> str:
    code = "import sys; from importlib.metadata import version as v; "
    code += "print(', '.join(f'{d} {v(d)}' for d in sys.argv[1:]))"
    p = subprocess.run(
        [str(PEER_PYTHON), "-c", code, *PEER_VERSIONS], capture_output=True, text=True, timeout=60
    )
    return p.stdout.strip() if p.returncode == 0 else "?"


# ---- the table


def render(servers: list[Server], meta: dict) -> str:
    lw, lg = servers

    def pct(s: Server, key: str, q: int) -> float:
        values = sorted(s.samples[key])
        return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]

    def cpu_ms(s: Server, key: str) -> float:
        return s.cpu_per_request(key) * 1e3

    def row(what: str, key: str) -> str:
        cells = []
        for s in servers:
            cells += [f"{pct(s, key, 50) * 1e3:.2f}", f"{pct(s, key, 99) * 1e3:.2f}"]
            cells.append(f"{cpu_ms(s, key):.2f}" if key in s.cpu else "")
        ratio = pct(lg, key, 50) / pct(lw, key, 50)
        cpu_ratio = f"{cpu_ms(lg, key) / cpu_ms(lw, key):.1f}" if key in lw.cpu else ""
        return f"| {what} | {' | '.join(cells)} | {ratio:.1f} | {cpu_ratio} |"

    deltas, n = meta["deltas"], len(lw.samples["one"])
    streams = len(lw.samples["end"])
    rps = {s.name: s.samples["rps"][0] for s in servers}
    eps = {s.name: statistics.median(s.samples["events/s"]) for s in servers}
    rate = {s.name: statistics.median(s.samples["delivery"]) for s in servers}
    events = {s.name: int(statistics.median(s.samples["events"])) for s in servers}
    per_delta = {s.name: s.cpu_per_request("end") / deltas * 1e6 for s in servers}
    return "\n".join(
        [
            "## HTTP peer",
            "",
            f"Date: {meta['date']}  ",
            f"Machine: {machine_line()}; /proc/loadavg {meta['load_before']} before, "
            f"{meta['load_after']} after  ",
            f"loopwright git {git_rev()}; peer: {meta['peer_versions']}  ",
            f"`{meta['command']}`: `loopwright serve` and `langgraph dev --no-browser --no-reload "
            f"--n-jobs-per-worker {CLIENTS}` (in-memory runtime) on 127.0.0.1 at once, instant "
            f"fake models; the httpx client in another process; {ROUNDS} interleaved rounds "
            f"after {WARMUP} uncounted requests of each kind. loopwright keeps every session in "
            "its SQLite event log; the peer keeps its threads in memory (a stateless run: a "
            "thread made and deleted per request). The peer's latency is mostly its run queue's "
            "poll (the in-memory runtime's `Runs.next` sleeps 0.5 s when it found no run); its "
            "CPU is not. Server CPU: utime + stime of the server's processes from /proc around "
            "each block, less the idle server's. See bench/README.md.",
            "",
            "| request | loopwright p50 ms | p99 ms | server CPU ms/req | LangGraph p50 ms "
            "| p99 ms | server CPU ms/req | LangGraph / loopwright p50 | CPU |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
            row(f'one step (model answers "ok"), n={n}', "one"),
            row(f'tool step (sync `ping`, then "done"), n={n}', "tool"),
            row(f"SSE, {deltas:,} deltas: first event, n={streams}", "first"),
            row(f"SSE, {deltas:,} deltas: end of the stream (CPU: per stream)", "end"),
            "",
            "| | loopwright | LangGraph | LangGraph / loopwright |",
            "|---|--:|--:|--:|",
            f"| SSE events per stream ({deltas:,} deltas) | {events['loopwright']:,} "
            f"| {events['langgraph']:,} | |",
            f"| SSE events/s, client-observed (median) | {eps['loopwright']:,.0f} "
            f"| {eps['langgraph']:,.0f} | {eps['langgraph'] / eps['loopwright']:.2f} |",
            f"| SSE events/s after the first event (median) | {rate['loopwright']:,.0f} "
            f"| {rate['langgraph']:,.0f} | {rate['langgraph'] / rate['loopwright']:.2f} |",
            f"| SSE server CPU per delta, µs | {per_delta['loopwright']:.1f} "
            f"| {per_delta['langgraph']:.1f} | {per_delta['langgraph'] / per_delta['loopwright']:.1f} |",
            f"| {CLIENTS} concurrent clients × {EACH} one-step requests, requests/s "
            f"| {rps['loopwright']:,.0f} | {rps['langgraph']:,.0f} "
            f"| {rps['langgraph'] / rps['loopwright']:.2f} |",
            f"| the same, server CPU ms/request | {cpu_ms(lw, 'rps'):.2f} "
            f"| {cpu_ms(lg, 'rps'):.2f} | {cpu_ms(lg, 'rps') / cpu_ms(lw, 'rps'):.1f} |",
            f"| idle server CPU, ms/s (taken off the CPU figures above) "
            f"| {lw.idle * 1e3:.1f} | {lg.idle * 1e3:.1f} | |",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="timed requests of each kind (default 200)")
    ap.add_argument("--deltas", type=int, default=1000, help="text deltas of the SSE answer")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    langgraph = PEERS_VENV / "bin" / "langgraph"
    if not langgraph.exists():
        sys.exit(f"no {langgraph}: bench/peers/install.sh installs the peer")
    os.environ.pop("LOOPWRIGHT_HOME", None)  # the store lives in the throwaway project
    load_before = Path("/proc/loadavg").read_text().strip()
    with tempfile.TemporaryDirectory(prefix="loopwright-http-peers-") as tmp:
        lw_root, lg_root = make_projects(Path(tmp), args.deltas)
        lw_port, lg_port = free_port(), free_port()
        lw_argv, lw_env = loopwright_argv(lw_port, lw_root)
        lg_argv = [str(langgraph), *LANGGRAPH_ARGS, "--host", "127.0.0.1", "--port", str(lg_port)]
        lw_url, lg_url = f"http://127.0.0.1:{lw_port}", f"http://127.0.0.1:{lg_port}"
        with (
            serving(lw_argv, lw_root, lw_env, f"{lw_url}/health") as lw_pid,
            serving(lg_argv, lg_root, QUIET, f"{lg_url}/ok") as lg_pid,
        ):
            servers = [loopwright_server(lw_url, lw_pid), langgraph_server(lg_url, lg_pid)]
            measure(servers, args.n, args.deltas)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load_before": load_before,
        "load_after": Path("/proc/loadavg").read_text().strip(),
        "peer_versions": peer_versions(),
        "deltas": args.deltas,
        "command": " ".join(["python bench/http_peers.py", *sys.argv[1:]]),
    }
    section = render(servers, meta)
    print(section)
    if args.write:
        write_section("## HTTP peer", section)


if __name__ == "__main__":
    main()
