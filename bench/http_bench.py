"""loopwright's HTTP benchmark: `loopwright serve` on loopback, with instant models.

usage: python bench/http_bench.py [-n 200] [--write]

A throwaway project gets three agents: `echo` answers "ok" (one step) and `tool` calls a sync
`ping` tool, then answers "done" (two steps), both with an instant FunctionModel; `scripted`
answers "ok" from `model: scripted:script.yaml` (re-read every run). The real server runs as a
subprocess and httpx measures from here: sequential latency (each message in a new session),
throughput of 8 concurrent clients, SSE time to the first frame and to `done`, and, to compare,
`echo`'s run through the runtime in-process on the same event log. `--write` replaces (or
appends) the "## HTTP server" section of bench/RESULTS.md. Not a test: every answer is checked,
but there is no target.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from _results import write_section
from run import git_rev, machine_line

from loopwright.project import load_project
from loopwright.runtime import Runtime
from loopwright.store import open_log

BENCH = Path(__file__).resolve().parent

HEAD = """\
from pathlib import Path

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage, Usage
from loopwright.testing import FunctionModel, Reply

USAGE = Usage(input_tokens=10, output_tokens=1)  # so that no token estimate runs
"""
ECHO = """
agent = Agent(name="echo", model=FunctionModel(lambda _: Reply(text="ok", usage=USAGE)))
"""
TOOL = '''

@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def reply(request):
    if isinstance(request.messages[-1], ToolResultMessage):
        return Reply(text="done", usage=USAGE)
    return Reply(tool_calls=(ToolCall(id="p1", name="ping", args={}),), usage=USAGE)


agent = Agent(name="tool", model=FunctionModel(reply), tools=[ping],
              rules=Path(__file__).with_name("rules.yaml"))
'''
FILES = {  # under agents/: two instant FunctionModels, and a script (re-read every run)
    "echo/agent.py": HEAD + ECHO,
    "tool/agent.py": HEAD + TOOL,
    "tool/rules.yaml": "rules: [{name: ping, tool: ping, decision: allow}]\n",
    "scripted/agent.yaml": "model: scripted:script.yaml\n",
    "scripted/script.yaml": "replies: [{text: ok, usage: {input_tokens: 10, output_tokens: 1}}]\n",
}
ANSWER = {"echo": "ok", "tool": "done", "scripted": "ok"}
WARMUP = 20
CLIENTS, EACH = 8, 50


def make_project(root: Path) -> None:
    (root / "loopwright.toml").write_text("")
    for name, text in FILES.items():
        path = root / "agents" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check(response: httpx.Response, agent: str) -> None:
    body = response.json()
    if response.status_code != 200 or body.get("text") != ANSWER[agent]:
        raise RuntimeError(f"{agent}: unexpected answer {response.status_code} {body}")
    if agent == "tool" and not any(e["type"] == "tool:result" for e in body["events"]):
        raise RuntimeError(f"tool: no tool result in {body['events']}")


def timed(n: int, once: Callable[[], list[float]]) -> list[list[float]]:
    """`n` results of `once()`, after WARMUP uncounted calls."""
    return [once() for _ in range(WARMUP + n)][WARMUP:]


def post(client: httpx.Client, agent: str) -> float:
    t0 = time.perf_counter()
    response = client.post(f"/agents/{agent}/messages", json={"message": "hi"})
    elapsed = time.perf_counter() - t0
    check(response, agent)
    return elapsed


def stream(client: httpx.Client, firsts: list[float]) -> float:
    """Seconds to the end of the `done` frame; the first frame's time goes into `firsts`."""
    t0 = time.perf_counter()
    first = done = 0.0
    event = ""
    with client.stream("POST", "/agents/echo/messages/stream", json={"message": "hi"}) as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line == "" and event:  # the end of a frame
                first = first or time.perf_counter() - t0
                done = time.perf_counter() - t0 if event == "done" else done
    if r.status_code != 200 or not done:
        raise RuntimeError(f"stream: status {r.status_code}, no `done` frame")
    firsts.append(first)
    return done


async def throughput(url: str) -> float:
    """Requests/s of CLIENTS clients (a connection each) sending EACH one-step messages."""
    ready = asyncio.Barrier(CLIENTS + 1)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            for i in range(EACH + 1):
                check(await c.post("/agents/echo/messages", json={"message": "hi"}), "echo")
                if i == 0:  # a warm connection, then all start together
                    await ready.wait()

    tasks = [asyncio.create_task(client()) for _ in range(CLIENTS)]
    await ready.wait()
    t0 = time.perf_counter()
    await asyncio.gather(*tasks)
    return CLIENTS * EACH / (time.perf_counter() - t0)


async def in_process(root: Path, n: int) -> list[float]:
    """`echo` through the runtime the server uses, each run in a new session of the project's
    event log."""
    project = load_project(root)
    log = await open_log(project.store_path())
    runtime = Runtime(project.agents, log)
    out: list[float] = []
    try:
        for _ in range(WARMUP + n):
            t0 = time.perf_counter()
            done = await (await runtime.send("default", "echo", None, "hi")).wait()
            out.append(time.perf_counter() - t0)
            if done is None or done.text != "ok":
                raise RuntimeError(f"in-process: unexpected end {done!r}")
    finally:
        await runtime.close()
        await log.close()
    return out[WARMUP:]


@contextlib.contextmanager
def serving(root: Path) -> Iterator[str]:
    """`loopwright serve` on a free loopback port until the block ends; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("loopwright")
    argv = [str(exe) if exe.exists() else "loopwright", "serve", "--project", str(root)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    log = root / "server.log"
    with log.open("wb") as out:  # the child keeps its own descriptor
        server = subprocess.Popen(argv, cwd=root, stdout=out, stderr=out, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while server.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"the server did not start:\n{log.read_text()}")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def measure(root: Path, n: int) -> tuple[dict[str, list[float]], float]:
    """Samples (seconds) by measure, and the throughput."""
    res = {"api": asyncio.run(in_process(root, n)), "first": []}
    with serving(root) as url, httpx.Client(base_url=url, timeout=60) as c:
        # rounds interleave the measures, so that drift spreads over every one
        rounds = timed(n, lambda: [*(post(c, a) for a in ANSWER), stream(c, res["first"])])
        res |= {key: [r[i] for r in rounds] for i, key in enumerate([*ANSWER, "done"])}
        rps = asyncio.run(throughput(url))
    res["first"] = res["first"][WARMUP:]
    return res, rps


def render(res: dict[str, list[float]], rps: float, command: str, load: float) -> str:
    def ms(key: str) -> tuple[float, float]:
        return statistics.median(res[key]) * 1e3, statistics.quantiles(res[key], n=20)[18] * 1e3

    def row(what: str, key: str) -> str:
        return f"| {what} | {ms(key)[0]:.2f} | {ms(key)[1]:.2f} | {len(res[key])} |"

    return "\n".join(
        [
            "## HTTP server",
            "",
            f"Date: {time.strftime('%Y-%m-%d %H:%M %Z')}  ",
            f"Machine: {machine_line()}, load average {load:.2f} at start  ",
            f"loopwright git {git_rev()}; `{command}`. The real `loopwright serve` on loopback, "
            "instant models, the project's SQLite event log; the httpx client in another process, "
            f"each message in a new session; (1), (2), (4) in interleaved rounds after {WARMUP} "
            "uncounted ones. See bench/README.md.",
            "",
            "| measure | median ms | p95 ms | n |",
            "|---|--:|--:|--:|",
            row("(1) `POST /agents/echo/messages`, one step", "echo"),
            row("(1b) the same, `model: scripted:script.yaml`", "scripted"),
            row("(2) `POST /agents/tool/messages`, sync tool call + answer", "tool"),
            row("(4) SSE `…/messages/stream`: first frame", "first"),
            row("(4) SSE `…/messages/stream`: end of the `done` frame", "done"),
            row("(5) in-process: `Runtime.send` to its `done`, same event log", "api"),
            f"| HTTP overhead: (1) − (5) | {ms('echo')[0] - ms('api')[0]:.2f} | | |",
            "",
            f"(3) Throughput, {CLIENTS} concurrent clients × {EACH} one-step messages: "
            f"**{rps:,.0f} requests/s**.",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="timed requests per latency (default 200)")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    os.environ.pop("LOOPWRIGHT_HOME", None)  # the store lives in the throwaway project
    with tempfile.TemporaryDirectory(prefix="loopwright-http-bench-") as tmp:
        make_project(Path(tmp))
        res, rps = measure(Path(tmp), args.n)
    command = " ".join(["python bench/http_bench.py", *sys.argv[1:]])
    section = render(res, rps, command, load)
    print(section)
    if args.write:
        write_section("## HTTP server", section)


if __name__ == "__main__":
    main()
