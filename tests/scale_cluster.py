"""Several `loopwright serve` processes on one PostgreSQL database, for test_scale_out.py: the
project they serve (an agent whose payments a human approves; both of its tools append their
call id to a record file, fsynced, for every real execution), the processes themselves, and an
SSE stream read as it comes (ending early when its process dies)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from test_cli import LOOPWRIGHT

SAFETY = 120
"""Seconds after which a wait fails the test instead of hanging it (none should take that long)."""
RECORD_ENV = "SCALE_OUT_RECORD"
"""The record file the tools append to."""

AGENT_PY = '''\
import os
from pathlib import Path

from loopwright import Agent, ToolContext, tool
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import FunctionModel, Reply


def _record(call_id: str) -> None:
    with open(os.environ["SCALE_OUT_RECORD"], "a") as f:
        f.write(call_id + "\\n")
        f.flush()
        os.fsync(f.fileno())


@tool
def pay(order: str, ctx: ToolContext) -> str:
    """Pay an order (a human approves each payment)."""
    _record(ctx.call_id)
    return f"paid {order}"


@tool
def note(order: str, ctx: ToolContext) -> str:
    """Note an order in the books."""
    _record(ctx.call_id)
    return f"noted {order}"


def reply(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text="settled")
    text = last.content
    if text.startswith("pay "):
        order = text.split()[1]
        calls = (
            ToolCall(id=f"pay-{order}", name="pay", args={"order": order}),
            ToolCall(id=f"note-{order}", name="note", args={"order": order}),
        )
        return Reply(text=f"paying {order}", tool_calls=calls)
    return Reply(text="ok: " + text)


agent = Agent(
    name="payer",
    description="Pays orders; a human approves each payment.",
    model=FunctionModel(reply),
    tools=[pay, note],
    rules=Path(__file__).with_name("rules.yaml"),
)
'''
RULES = """\
default_decision: allow
rules:
  - {name: payments-need-approval, tool: pay, decision: ask}
"""
TOML = """\
[server]
max_runs_per_tenant = 1000
max_streams_per_tenant = 1000
max_connections = 1000
"""


def make_project(root: Path) -> Path:
    folder = root / "agents" / "payer"
    folder.mkdir(parents=True)
    (root / "loopwright.toml").write_text(TOML)
    (folder / "agent.py").write_text(AGENT_PY)
    (folder / "rules.yaml").write_text(RULES)
    return root


class Served:
    """One `loopwright serve` process on a free loopback port; its stderr is kept."""

    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [LOOPWRIGHT, "serve", "--project", str(project), "--port", "0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        assert self.process.stderr is not None
        stream = self.process.stderr
        self.reader = threading.Thread(target=lambda: [self.lines.put(x) for x in stream])
        self.reader.start()
        self.url = ""
        self.alive = True

    def started(self) -> str:
        """The URL it serves at, once it says so (the playground's line)."""
        while not self.url:
            try:
                line = self.lines.get(timeout=SAFETY)
            except queue.Empty:
                raise AssertionError(f"no URL from the server: {self.stderr}") from None
            self.stderr.append(line)
            found = re.search(r"^playground: (\S+)/playground$", line)
            if found:
                self.url = found[1]
            assert self.process.poll() is None, f"the server exited: {self.stderr}"
        return self.url

    def kill(self) -> None:
        """SIGKILL: nothing is cleaned up, its leases stay until they expire."""
        self.alive = False
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(SAFETY)

    def stop(self) -> str:
        """Stop it (SIGTERM, or nothing if it is dead); everything it wrote on stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(SAFETY)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.reader.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()
        while not self.lines.empty():
            self.stderr.append(self.lines.get())
        return "".join(self.stderr)


FRAME = re.compile(r"event: ([a-z_:]+)\n(?:id: (\d+)\n)?data: (\{.*\})")
Frame = tuple[int | None, dict[str, Any]]


class Stream:
    """An SSE response read in a task of its own as it comes: its status once the head has
    come, its frames (id, event), and why it ended (`broken`: its connection failed)."""

    def __init__(self, http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> None:
        self.where = f"{method} {http.base_url}{path}"
        self.status: int | None = None
        self.body = b""
        self.frames: list[Frame] = []
        self.broken: Exception | None = None
        self.ended = False
        self._changed = asyncio.Condition()
        self.task = asyncio.ensure_future(self._read(http, method, path, kwargs))

    async def _read(self, http: httpx.AsyncClient, method: str, path: str, kwargs: Any) -> None:
        try:
            async with http.stream(method, path, **kwargs) as response:
                await self._note(lambda: setattr(self, "status", response.status_code))
                if response.status_code != 200:
                    self.body = await response.aread()
                    return
                assert response.headers["content-type"].startswith("text/event-stream")
                buffer = ""
                async for chunk in response.aiter_text():
                    buffer += chunk
                    while "\n\n" in buffer:
                        block, buffer = buffer.split("\n\n", 1)
                        if not block.startswith(":"):  # (a keep-alive comment)
                            await self._note(lambda block=block: self._frame(block))
                assert buffer == "", buffer
        except httpx.TransportError as exc:
            self.broken = exc
        finally:
            await self._note(lambda: setattr(self, "ended", True))

    def _frame(self, block: str) -> None:
        match = FRAME.fullmatch(block)
        assert match, f"bad frame: {block!r}"
        kind, seq, data = match.groups()
        event = json.loads(data)
        assert event["type"] == kind
        self.frames.append((None if seq is None else int(seq), event))

    async def _note(self, change: Callable[[], object]) -> None:
        async with self._changed:
            change()
            self._changed.notify_all()

    async def until(self, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The first event `test` accepts, once it has come; None if the stream ended first."""
        async with self._changed:
            while True:
                for _, event in self.frames:
                    if test(event):
                        return event
                if self.ended:
                    return None
                await asyncio.wait_for(self._changed.wait(), SAFETY)

    async def head(self) -> int | None:
        """The response's status, once it has come (None: the request failed)."""
        async with self._changed:
            while self.status is None and not self.ended:
                await asyncio.wait_for(self._changed.wait(), SAFETY)
        return self.status

    async def end(self) -> None:
        await asyncio.wait_for(asyncio.shield(self.task), SAFETY)

    def ids(self) -> list[int]:
        return [seq for seq, _ in self.frames if seq is not None]


def env_for(pg_url: str, record: Path, lease: float) -> dict[str, str]:
    drop = ("LOOPWRIGHT_HOME", "LOOPWRIGHT_CRASH_AFTER")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {
        "NO_COLOR": "1",
        "LOOPWRIGHT_STORE_URL": pg_url,
        "LOOPWRIGHT_LEASE_SECONDS": str(lease),
        RECORD_ENV: str(record),
    }
