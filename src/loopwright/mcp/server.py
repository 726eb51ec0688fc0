"""One configured MCP server as a `Toolset`: its connection, its tools, their calls.

The server starts when the toolset is entered (lazily: on the first run of an agent that uses
it) and is shared by every session of the process; `exit` stops it. Its tools are listed once
per server process and listed again after `notifications/tools/list_changed` (the toolset's
`version` changes, so runs list it again). Each tool is an ordinary `Tool` named
`mcp__<server>__<tool>`, whose arguments are checked against the server's input schema before
the gate sees them. A server's elicitation is answered as `elicit` says; one nobody can answer
now stops the call (cancelled on the server), which returns `NeedsAnswer`. Each call carries
its idempotency key in its request's `_meta`, as `IDEMPOTENCY_KEY` (docs/idempotency.md).

Nothing that goes wrong with the server escapes a call: a server that fails to start, crashes
or breaks the connection gives an error result naming the server, and is started again on the
next use. The `mcp` SDK's transports and sessions are anyio context managers that must be
entered and left by one task, so each connection lives in a task of its own, which enters
them, says it is ready, and waits to be told to stop; calls are made from the runs' tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import describe
from ..tools import NeedsAnswer, Tool, ToolContext, ToolReturn
from ..toolsets import Toolset
from . import elicit
from .config import HttpServer, ServerConfig, StdioServer, in_sandbox, redact
from .naming import build_tools
from .results import to_return

if TYPE_CHECKING:
    from ..sandbox import Sandbox

log = logging.getLogger("loopwright.tools")

START_TIMEOUT = 30.0
"""Seconds a server has to start and answer its first listing."""
RETRY_AFTER = 30.0
"""Seconds before listing tries again to start a server that failed to (a call always tries)."""
CONNECTION_CLOSED = -32000
IDEMPOTENCY_KEY = "dev.loopwright/idempotencyKey"
"""The `_meta` key of a `tools/call` that holds the call's `ToolContext.idempotency_key`."""


class Unavailable(Exception):
    """The server could not be reached; the message names it and says why (no secrets)."""


class MCPServer(Toolset):
    """The tools of one MCP server (see the module)."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        start_timeout: float = START_TIMEOUT,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        self.config = config
        self.name = config.name
        self.start_timeout = start_timeout
        self.retry_after = retry_after
        self.starts = 0
        """How many times a server process (or HTTP session) was started: restarts show."""
        self._tools: tuple[Tool, ...] = ()
        self._version = 0
        self._stale = False
        self._conn: _Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry_at: float | None = None
        """When a server that failed to start may be tried again by a listing (None: now)."""
        self._calls: dict[int, _InFlight] = {}
        """Calls in flight, newest last: an elicitation is asked on behalf of the newest."""

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r})"

    def with_sandbox(self, sandbox: Sandbox) -> MCPServer:
        """This server under `sandbox` (a stdio one; `in_sandbox`), a new toolset."""
        if not isinstance(self.config, StdioServer) or self.config.sandboxed:
            return self
        config = in_sandbox(self.config, sandbox)
        return MCPServer(config, start_timeout=self.start_timeout, retry_after=self.retry_after)

    @property
    def version(self) -> int:
        """Changes when the tools may have: `list_changed`, a new process with other tools, or
        the time to try again to start a server that failed (so that runs list it again)."""
        if self._retry_at is not None and time.monotonic() >= self._retry_at:
            self._retry_at = None
            self._version += 1
        return self._version

    async def enter(self) -> None:
        """Start the server. A failure is logged, never raised: the run goes on without its
        tools (or with those of its last process), and the next use tries again."""
        try:
            await self.connect()
        except Unavailable as exc:
            log.warning("%s", exc)

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools (those of its last process when it is down)."""
        live = self._conn is not None and not self._conn.closed
        if (not live and self._retry_at is None) or (live and self._stale):
            with contextlib.suppress(Unavailable):
                conn = await self.connect()
                if self._stale:
                    await self._relist(conn)
        return self._tools

    async def exit(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.stop()

    async def connect(self) -> _Connection:
        """The live connection, the server started first if need be (`Unavailable` if it
        cannot be)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (asyncio.run again): the old one's are gone
            self._loop, self._lock, self._conn = loop, asyncio.Lock(), None
        assert self._lock is not None
        async with self._lock:
            if self._conn is not None and not self._conn.closed:
                return self._conn
            if self._conn is not None:
                await self._conn.stop()
                self._conn = None
            conn = _Connection(self)
            self.starts += 1
            try:
                await conn.start(self.start_timeout)
                await self._relist(conn)
            except Exception as exc:
                self._retry_at = time.monotonic() + self.retry_after
                why = conn.explain(exc)
                await conn.stop()
                raise Unavailable(f"MCP server '{self.name}' failed to start: {why}") from None
            except BaseException:
                await conn.stop()
                raise
            self._conn, self._retry_at = conn, None
            return conn

    async def call(
        self, tool: str, args: dict[str, Any], ctx: ToolContext | None
    ) -> ToolReturn | NeedsAnswer:
        """Call the server's tool `tool` (its own name); never raises but for cancellation
        (which the SDK passes on to the server as `notifications/cancelled`). A call whose
        server asks a question nobody can answer now is cancelled the same way, and returns
        `NeedsAnswer` (see `elicit`)."""
        try:
            conn = await self.connect()
        except Unavailable as exc:
            return ToolReturn(content=str(exc), is_error=True)
        this = _InFlight(ctx, asyncio.get_running_loop().create_future())
        self._calls[id(this)] = this

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if ctx is not None:
                shown = f"{done:g}/{total:g}" if total else f"{done:g}"
                said = redact(message, conn.secrets) if message else shown
                ctx.progress(said, done / total if total else None)

        key = ctx.idempotency_key if ctx is not None else ""
        meta = {IDEMPOTENCY_KEY: key} if key else None
        running = asyncio.ensure_future(
            conn.client.call_tool(tool, args, progress_callback=progress, meta=meta)
        )
        try:
            await asyncio.wait({running, this.question}, return_when=asyncio.FIRST_COMPLETED)
            if this.question.done():
                return this.question.result()
            result = running.result()
        except Exception as exc:
            return ToolReturn(content=await self._failed(conn, exc), is_error=True)
        finally:
            del self._calls[id(this)]
            try:
                if not running.done():
                    running.cancel()
                    await asyncio.wait({running})
            finally:
                this.stopped.set()
                if running.done() and not running.cancelled():
                    running.exception()  # (retrieved: it is no longer awaited)
        return to_return(result, conn.secrets)

    async def _failed(self, conn: _Connection, exc: Exception) -> str:
        """What the model reads when a call fails outside the tool (the server's error
        response, or a broken connection: then the server is stopped, to start anew)."""
        code = getattr(exc, "code", None)
        if isinstance(code, int) and code != CONNECTION_CLOSED:
            return f"MCP server '{self.name}' refused the call: {redact(str(getattr(exc, 'message', exc)), conn.secrets)}"
        why = conn.explain(exc)
        conn.closed = True
        with contextlib.suppress(Exception):
            await conn.stop()
        return (
            f"MCP server '{self.name}' stopped answering ({why}); "
            "it will be started again on the next call"
        )

    async def _relist(self, conn: _Connection) -> None:
        """Fetch the tool list (every page); the version changes if the tools did."""
        self._stale = False
        listed: list[Any] = []
        cursor: str | None = None
        async with asyncio.timeout(self.start_timeout):
            while True:
                page = await conn.client.list_tools(cursor=cursor)
                listed += page.tools
                cursor = page.next_cursor
                if not cursor:
                    break
        tools = build_tools(self, listed)
        if [(t.name, t.description, t.parameters) for t in tools] != [
            (t.name, t.description, t.parameters) for t in self._tools
        ]:
            self._tools = tools
            self._version += 1

    def tools_changed(self) -> None:
        """`notifications/tools/list_changed`: the next listing fetches them again."""
        self._stale = True
        self._version += 1

    def current_call(self) -> _InFlight | None:
        return next(reversed(self._calls.values()), None)


@dataclass(slots=True)
class _InFlight:
    """A call in flight."""

    ctx: ToolContext | None
    question: asyncio.Future[NeedsAnswer]
    """Set by an elicitation nobody can answer now: the call stops, and returns it."""
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the call is over (a stopped one cancelled on the server first)."""


class _Connection:
    """One server process (or HTTP session), held open by a task of its own."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.config = server.config
        self.secrets = self.config.secrets()
        self.client: Any = None
        self.closed = False
        self.failure: BaseException | None = None
        self.stderr: TextIO | None = None
        self._last_line = ""
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"mcp server {self.server.name}"
        )
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            raise TimeoutError(f"no answer within {timeout:g}s") from None
        if self.client is None:
            raise self.failure or ConnectionError("the connection closed")

    async def _run(self) -> None:
        from mcp import Client
        from mcp.types import Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    await self._transport(stack),
                    elicitation_callback=self._elicit,
                    message_handler=self._message,
                    client_info=Implementation(name="loopwright", version=_version()),
                    cache=None,
                )
                await stack.enter_async_context(client)
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self.failure = exc
        finally:
            self.closed = True
            self.client = None
            self._close_stderr()  # its last line kept: the task may end with its loop, unstopped
            self._ready.set()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        if isinstance(self.config, StdioServer):
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            # the server's stderr, kept (not inherited: ours may be no file) for its last line
            self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by stop)
            params = StdioServerParameters(
                command=self.config.command,
                args=list(self.config.args),
                env=dict(self.config.env) or None,
                cwd=self.config.cwd,
            )
            return stdio_client(params, errlog=self.stderr)
        assert isinstance(self.config, HttpServer)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(
            headers=dict(self.config.headers), timeout=httpx2.Timeout(30.0, read=300.0)
        )
        await stack.enter_async_context(http)
        return streamable_http_client(self.config.url, http_client=http)

    async def _message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.server.tools_changed()

    async def _elicit(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult

        schema = getattr(params, "requested_schema", None)
        if not isinstance(schema, dict):  # URL mode: nothing a question can carry
            return ElicitResult(action="decline")
        call = self.server.current_call()
        if call is None:  # (asked outside a call: nobody it could be put to)
            return ElicitResult(action="decline")
        content = await elicit.answer(self.server.name, call.ctx, params.message, schema)
        if isinstance(content, NeedsAnswer):
            if not call.question.done():
                call.question.set_result(content)
            await call.stopped.wait()  # its call cancelled first: the server stops at this
            return ElicitResult(action="cancel")
        if content is None:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=content)

    def explain(self, exc: BaseException) -> str:
        """Why the server failed, with the last line it wrote to stderr, secrets removed."""
        text = describe(self.failure if isinstance(exc, ConnectionError) and self.failure else exc)
        tail = self._stderr_tail()
        if tail:
            text += f"; its last output: {tail}"
        return redact(text, self.secrets)

    def _stderr_tail(self) -> str:
        if self.stderr is None or self.stderr.closed:
            return self._last_line
        with contextlib.suppress(OSError, ValueError):
            self.stderr.flush()
            raw = self.stderr.buffer  # (its last 4,000 bytes: a server may write gigabytes)
            raw.seek(max(0, raw.seek(0, os.SEEK_END) - 4000))
            text = raw.read().decode("utf-8", errors="replace")
            lines = [line.strip() for line in text.splitlines()]
            return next((line for line in reversed(lines) if line), "")[:300]
        return ""

    async def stop(self) -> None:
        """Leave the contexts in their task (the process ends); cancel a task stuck starting."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if self.client is None:
                task.cancel()
            done, _ = await asyncio.wait({task}, timeout=10)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=5)
        self._close_stderr()

    def _close_stderr(self) -> None:
        if self.stderr is not None and not self.stderr.closed:
            self._last_line = self._stderr_tail()
            self.stderr.close()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopwright")
    except PackageNotFoundError:
        return "0"
