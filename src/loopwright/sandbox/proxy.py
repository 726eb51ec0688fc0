"""The HTTP(S) proxy that enforces a sandbox's allow-list of hosts (docs/sandbox.md).

A sandbox with `network: [hosts]` has no route out (its own network namespace); its one way
out is this proxy, an asyncio server on a unix socket in the server process, bound into the
sandbox at `/run/lw-proxy.sock` and reached there through a forwarder on the sandbox's own
loopback (`forward.py`). It takes `CONNECT host:port` (https, or any TCP) and absolute-URI
requests (`GET http://host/path`, plain http); a host the list allows is resolved and connected
to from here, any other is refused with 403 and logged. A name that resolves to a loopback or
link-local address (the host's own services, a cloud's metadata endpoint) is refused unless the
entry that allowed it is an address or `localhost`.

It is a `Toolset` without tools so that its owner (a runtime, a session's) starts it with the
run and stops it on close; a sandboxed call starts it too when it runs on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Sequence
from urllib.parse import urlsplit

from ..tools import Tool
from ..toolsets import Toolset
from .network import allows, is_literal

__all__ = ["NetworkProxy"]

log = logging.getLogger("loopwright.sandbox")
_DROP = (b"proxy-connection:", b"proxy-authorization:", b"connection:", b"keep-alive:")


class Refused(Exception):
    """What the client is answered instead of a connection: an HTTP status and a reason."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class NetworkProxy(Toolset):
    """One sandbox policy's proxy: `path` is its socket (its directory is made on `enter`)."""

    name = "sandbox-network"

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed
        folder = os.path.join(tempfile.gettempdir(), f"lw-proxy-{secrets.token_hex(8)}")
        self.path = os.path.join(folder, "proxy.sock")
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop it serves on
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()  # both ends of every connection

    async def enter(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self.close()  # one left by a loop that is gone (a program's earlier asyncio.run)
        self._loop = loop
        os.mkdir(os.path.dirname(self.path), 0o700)  # fails rather than use one made before
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, 0o666)  # the sandbox's user may be another (docs/sandbox.md)
        listener.listen(64)  # connections wait from now on: a concurrent call need not
        self._server = await asyncio.start_unix_server(self._serve, sock=listener)

    async def list_tools(self) -> Sequence[Tool]:
        return ()

    async def exit(self) -> None:
        server = self._server
        self.close()
        if server is not None:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    def close(self) -> None:
        """Stop listening, end every connection and remove the socket (`exit` waits too)."""
        server, self._server, self._loop = self._server, None, None
        if server is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: so are its sockets
                server.close()
                for task in list(self._tasks):
                    task.cancel()
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        self._writers.add(writer)
        try:
            await self._one(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client or the host went away
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            self._writers.discard(writer)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line, _, rest = head.partition(b"\r\n")
        try:
            method, host, port, first = _target(line)
            upstream = await self._open(method, host, port)
        except Refused as refused:
            return await _answer(writer, refused.status, str(refused))
        up_reader, up_writer = upstream
        self._writers.add(up_writer)
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:  # the origin form, one request per connection
                kept = [h for h in rest.split(b"\r\n") if h and not h.lower().startswith(_DROP)]
                up_writer.write(b"\r\n".join([first, *kept, b"Connection: close", b"", b""]))
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._writers.discard(up_writer)
            up_writer.close()

    async def _open(
        self, method: str, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        entry = allows(self.allowed, host, port)
        if entry is None:
            log.warning(
                "sandbox network: refused %s %s:%d (not in the allow-list)", method, host, port
            )
            raise Refused(
                "403 Forbidden", f"{host}:{port} is not in the sandbox's network allow-list"
            )
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise Refused("502 Bad Gateway", f"cannot resolve {host}: {exc}") from None
        address = str(found[0][4][0])
        if not is_literal(entry) and _inward(address):
            log.warning(
                "sandbox network: refused %s %s:%d (resolves to %s)", method, host, port, address
            )
            raise Refused("403 Forbidden", f"{host} resolves to a local address ({address})")
        try:
            return await asyncio.open_connection(address, port)
        except OSError as exc:
            raise Refused("502 Bad Gateway", f"cannot connect to {host}:{port}: {exc}") from None


def _target(line: bytes) -> tuple[str, str, int, bytes]:
    """The method, host, port and origin-form request line of a proxy request's first line."""
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3:
        raise Refused("400 Bad Request", "not an HTTP request line")
    method, target, version = parts
    if method == "CONNECT":
        split = urlsplit(f"//{target}")
        default, path = None, ""
    else:
        split = urlsplit(target)
        if split.scheme != "http":
            raise Refused("400 Bad Request", "expected CONNECT or an absolute http:// URI")
        default, path = 80, split.path or "/"
        path += f"?{split.query}" if split.query else ""
    try:
        port = split.port or default
    except ValueError:
        port = None
    if not split.hostname or port is None:
        raise Refused("400 Bad Request", f"no host and port in {target!r}")
    return method, split.hostname, port, f"{method} {path} {version}".encode("latin-1")


def _inward(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified


async def _answer(writer: asyncio.StreamWriter, status: str, reason: str) -> None:
    body = f"loopwright sandbox: {reason}\n".encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
    writer.write(f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(OSError):
        await writer.drain()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        sink.close()
