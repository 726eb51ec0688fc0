"""A webhook receiver for the notification tests: a real HTTP server on 127.0.0.1 (in a thread
of the test process) that checks each POST's `X-Loopwright-Signature` against its secret, keeps
what it got, and answers with the statuses it is told to (200 once they are used up)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loopwright.notify import SIGNATURE_HEADER, verify

SAFETY = 60.0
"""Seconds after which a wait fails the test instead of hanging it."""


@dataclass(frozen=True)
class Got:
    path: str
    headers: dict[str, str]
    raw: bytes
    signed: bool
    """The signature header is the HMAC of the raw body with the receiver's secret."""

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.raw)  # type: ignore[no-any-return]


class Receiver:
    def __init__(self, secret: str, statuses: list[int] | None = None) -> None:
        self.secret, self.statuses = secret, list(statuses or [])
        self.got: list[Got] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                header = self.headers.get(SIGNATURE_HEADER, "")
                got = Got(self.path, dict(self.headers), raw, verify(raw, receiver.secret, header))
                with receiver.changed:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.got.append(got)
                    receiver.changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(SAFETY)

    def wait(self, count: int) -> list[Got]:
        """Once `count` requests came (a safety net: fails after `SAFETY` seconds)."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.got) >= count, SAFETY), self.got
            return list(self.got)
