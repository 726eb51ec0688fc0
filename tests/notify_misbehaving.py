"""A webhook receiver that misbehaves, for the notification tests: a real HTTP/1.1 server on
127.0.0.1 in the test's own event loop (asyncio streams), which reads each POST whole and then
answers as its `mode` says:

- `ok`: 200 at once (and takes the next POST on the same connection);
- `trickle`: 200 and its headers, then one byte of a body that never ends every `every` seconds
  (a read never waits longer than that: httpx's per-read timeout never fires);
- `huge`: 200 and a `HUGE`-byte body, as fast as the client takes it;
- `silent`: never a byte.

It counts the body bytes the client took (`sent`: written and drained, so at most a socket's
buffers more than the client read) and the connections the client closed before the answer
ended (`cut`); `until` waits for a condition on them (a safety net fails it after `SAFETY`)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Callable
from typing import Any, Literal

SAFETY = 60.0
"""Seconds after which a wait fails the test instead of hanging it (never decides a result)."""
HUGE = 64 * 1024 * 1024
Mode = Literal["ok", "trickle", "huge", "silent"]


class Misbehaving:
    def __init__(self, mode: Mode, *, every: float = 0.05, query: str = "") -> None:
        self.mode, self.every, self.query = mode, every, query
        self.bodies: list[dict[str, Any]] = []
        self.sent = self.cut = self.open = 0
        self.changed = asyncio.Condition()
        self.writers: set[asyncio.StreamWriter] = set()
        self.url = ""

    async def __aenter__(self) -> Misbehaving:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/hook{self.query}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for writer in list(self.writers):
            writer.close()
        await self.until(lambda: self.open == 0)
        await self.server.wait_closed()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(SAFETY), self.changed:
            await self.changed.wait_for(condition)

    async def _note(self, **more: int) -> None:
        async with self.changed:
            for name, n in more.items():
                setattr(self, name, getattr(self, name) + n)
            self.changed.notify_all()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        await self._note(open=1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65_536)  # (little slack)
        try:
            while await self._answer(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            await self._note(cut=1)
        finally:
            self.writers.discard(writer)
            writer.close()
            await self._note(open=-1)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answers one POST; False once the connection is done with."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        assert length is not None, head
        body = json.loads(await reader.readexactly(int(length[1])))
        async with self.changed:
            self.bodies.append(body)
            self.changed.notify_all()
        if self.mode == "ok":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return True
        if self.mode == "silent":
            await reader.read()  # (until the client lets go)
            raise ConnectionResetError("the client closed it")
        size = HUGE if self.mode == "huge" else 10**12
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
        await writer.drain()
        chunk = b"x" * (65_536 if self.mode == "huge" else 1)
        while self.sent < HUGE:
            writer.write(chunk)
            await writer.drain()
            await self._note(sent=len(chunk))
            if self.mode == "trickle":
                await asyncio.sleep(self.every)  # (the misbehaviour itself: not a wait)
        return False
