"""A TCP proxy on loopback in front of a server, whose `cut()` drops every connection through
it at once (as a network failure would, mid-stream); connections made afterwards go through.
`cut_on`: bytes whose first passage from the server to a client cuts (once they are through),
then calls `on_cut`.
The clients' tests resume their streams across it (test_client.py, test_client_ts.py)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit


class CuttingProxy:
    def __init__(
        self, target: str, cut_on: bytes | None = None, on_cut: Callable[[], None] | None = None
    ) -> None:
        self.cut_on, self.on_cut = cut_on, on_cut
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.connections = 0
        self.cuts = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> CuttingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        self._drop()

    def cut(self) -> None:
        """Drop every connection open now (both sides)."""
        with self.lock:
            self.cuts += 1
        self._drop()

    def _drop(self) -> None:
        with self.lock:
            dropped, self.open = self.open, []
        for sock in dropped:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.open += [client, upstream]
                self.connections += 1
            for a, b, watch in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pipe, args=(a, b, watch), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, watch: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
                if watch and self.cut_on is not None and self.cut_on in data and not self.cuts:
                    self.cut()
                    if self.on_cut is not None:
                        self.on_cut()
        _close(source, sink)


def _close(source: socket.socket, sink: socket.socket) -> None:
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def cutting(
    target: str, cut_on: bytes | None = None, on_cut: Callable[[], None] | None = None
) -> Iterator[CuttingProxy]:
    with CuttingProxy(target, cut_on, on_cut) as proxy:
        yield proxy
