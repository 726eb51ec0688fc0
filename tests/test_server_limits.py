"""The server's bounds, on a real server configured as `loopwright serve` configures it: silent
or slow connections are closed by the idle and request timeouts and never hold one of the
`max_connections` places (only authenticated requests do, 503 past them); one tenant's runs
and streams are capped (429 with `Retry-After`) so that it cannot starve another. Nothing here
sleeps: a timeout is short, and the test waits (boundedly) for the server to close the socket."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, _Uvicorn, make_project
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.server.limits import serve_config

SAFETY = 60
"""Seconds after which a wait fails the test instead of hanging it (no wait comes near)."""
ACME, GLOBEX = "acme-token-0123456789", "globex-token-0123456789"
TOKENS = f'[auth.tokens]\n"{ACME}" = "acme"\n"{GLOBEX}" = "globex"\n'


class Served(LiveServer):
    """The test project served with `serve_config` (the connection deadlines of its settings)."""

    def __init__(self, root: Path, toml: str) -> None:
        make_project(root, toml)
        app = create_app(load_project(root))
        super().__init__(app)
        self.root = root
        settings = app.state.loopwright.settings
        config = serve_config(app, settings, log_level="error", lifespan="on")
        self.server = _Uvicorn(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def http(self, token: str | None = None) -> httpx.Client:
        """A client opening a connection per request (kept-alive ones may hit the idle timeout)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        limits = httpx.Limits(max_keepalive_connections=0)
        return self.client(headers=headers, limits=limits)

    def connect(self) -> socket.socket:
        host, port = self.url.removeprefix("http://").split(":")
        return socket.create_connection((host, int(port)), timeout=SAFETY)


@contextlib.contextmanager
def served(tmp_path: Path, toml: str) -> Iterator[Served]:
    with Served(tmp_path / "shop", toml) as live:
        yield live


def closed_by_server(connection: socket.socket) -> bool:
    """Whether the server closes the connection (read until it does; bounded by SAFETY)."""
    with connection:
        while chunk := connection.recv(4096):
            if chunk.startswith(b"HTTP/1.1 "):  # an answer: the server did not just close it
                return False
        return True


class Held:
    """A streamed run of the shop waiting for its refund's approval, held on a socket."""

    def __init__(self, live: Served, token: str | None, session: str) -> None:
        self.connection = live.connect()
        body = json.dumps({"message": "refund it", "sessionId": session}).encode()
        auth = f"authorization: Bearer {token}\r\n" if token else ""
        head = (
            "POST /agents/shop/messages/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"{auth}content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.connection.sendall(head.encode() + body)
        self.buffer = b""
        assert self.read_until(b"\r\n").startswith(b"HTTP/1.1 200")
        pending = self.event("approval:pending")
        self.pending_id: str = pending["id"]

    def read_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            chunk = self.connection.recv(4096)
            assert chunk, f"the stream ended before {marker!r}: {self.buffer[-300:]!r}"
            self.buffer += chunk
        found, _, self.buffer = self.buffer.partition(marker)
        return found + marker

    def event(self, kind: str) -> dict[str, Any]:
        """The data of the next `kind` event."""
        while True:
            frame = self.read_until(b"\n\n").decode()
            lines = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
            if lines.get("event") == kind:
                data: dict[str, Any] = json.loads(lines["data"])
                return data

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()


def too_many(answer: httpx.Response, status: int, error: str) -> None:
    assert (answer.status_code, answer.json()) == (status, {"error": error})
    assert answer.headers["retry-after"] == "5"


# ---- connections -----------------------------------------------------------------------------


def test_silent_connections_hold_no_place_and_are_closed_when_idle(tmp_path: Path) -> None:
    toml = "[server]\nmax_connections = 1\nidle_timeout = 0.2\nrequest_timeout = 600\n"
    with served(tmp_path, toml) as live, live.http() as http:
        silent = [live.connect() for _ in range(5)]
        assert http.get("/agents").status_code == 200  # five silent ones, a budget of one
        assert http.get("/health").json()["ok"] is True
        assert all(closed_by_server(connection) for connection in silent)


def test_a_request_that_does_not_arrive_whole_in_time_is_cut_off(tmp_path: Path) -> None:
    toml = "[server]\nrequest_timeout = 0.3\nidle_timeout = 600\n"
    with served(tmp_path, toml) as live, live.http() as http, contextlib.ExitStack() as stack:
        held = stack.enter_context(Held(live, None, "held"))  # a stream open longer...
        head = live.connect()
        head.sendall(b"GET /agents HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # never the blank line
        body = live.connect()
        body.sendall(
            b"POST /agents/greeter/messages HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b'content-type: application/json\r\ncontent-length: 100\r\n\r\n{"message"'
        )
        again = live.connect()  # a kept-alive connection whose next request stops halfway
        again.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        assert again.recv(12) == b"HTTP/1.1 200"
        again.sendall(b"GET /agents HTTP/1.1\r\nhost: 12")
        assert closed_by_server(head) and closed_by_server(body)
        assert closed_by_server(again)
        # ...than the request timeout is not cut off: its run goes on once approved
        approved = http.post(f"/approvals/{held.pending_id}/approve", json={"by": "ana"})
        assert approved.json()["stopReason"] == "completed"
        assert held.event("done")["stopReason"] == "completed"


def test_past_the_budget_503_but_unauthenticated_requests_never_count(tmp_path: Path) -> None:
    with (
        served(tmp_path, f"[server]\nmax_connections = 1\n{TOKENS}") as live,
        live.http(ACME) as acme,
        live.http() as nobody,
        Held(live, ACME, "held"),  # the one place
    ):
        too_many(acme.get("/agents"), 503, "the server is serving all it can: retry later")
        assert nobody.get("/agents").status_code == 401  # answered, and never counted


# ---- tenants ---------------------------------------------------------------------------------


def test_a_tenant_at_its_runs_limit_gets_429_and_the_others_go_on(tmp_path: Path) -> None:
    toml = f"[server]\nmax_runs_per_tenant = 1\n{TOKENS}"
    with served(tmp_path, toml) as live, live.http(ACME) as acme, live.http(GLOBEX) as globex:
        hello = {"message": "hi"}
        error = "too many runs at once for this tenant (at most 1): retry later"
        with Held(live, ACME, "held") as held:
            too_many(acme.post("/agents/greeter/messages", json=hello), 429, error)
            too_many(acme.post("/agents/greeter/messages/stream", json=hello), 429, error)
            greeted = globex.post("/agents/greeter/messages", json=hello)
            assert greeted.json()["text"] == "Hello there!"
            # a decision is never refused: it lets the admitted run finish
            approved = acme.post(f"/approvals/{held.pending_id}/approve", json={"by": "ana"})
            assert approved.json()["stopReason"] == "completed"
            assert held.event("done")["stopReason"] == "completed"
        answers = [acme.post("/agents/greeter/messages", json=hello)]
        while answers[-1].status_code == 429 and len(answers) < 100:  # (until the run's end
            answers.append(acme.post("/agents/greeter/messages", json=hello))  # is counted)
        assert answers[-1].json()["text"] == "Hello there!"


def test_a_tenant_at_its_streams_limit_gets_429_and_the_others_go_on(tmp_path: Path) -> None:
    toml = f"[server]\nmax_streams_per_tenant = 1\n{TOKENS}"
    with served(tmp_path, toml) as live, live.http(ACME) as acme:
        error = "too many streams at once for this tenant (at most 1): retry later"
        second = {"message": "refund it", "sessionId": "second"}
        sse = {"accept": "text/event-stream"}
        with Held(live, ACME, "held"):
            too_many(acme.post("/agents/shop/messages/stream", json=second), 429, error)
            assert acme.get("/agents/shop/sessions/second").status_code == 404  # not started
            too_many(acme.get("/agents/shop/sessions/held/stream"), 429, error)
            too_many(acme.get("/agents/shop/sessions/held/events", headers=sse), 429, error)
            assert acme.post("/agents/greeter/messages", json={"message": "hi"}).status_code == 200
            with Held(live, GLOBEX, "held"):  # another tenant streams as before
                pass


def test_two_tenants_at_the_limit_each_hold_half_the_places_never_all(tmp_path: Path) -> None:
    """The caps default to 50 and the server serves 4 at once: with two tenants, each holds at
    most its share (half), so neither can lock the other out."""
    toml = f"[server]\nmax_connections = 4\n{TOKENS}"
    with served(tmp_path, toml) as live, live.http(ACME) as acme, live.http(GLOBEX) as globex:
        settings = live.app.state.loopwright.settings
        assert (settings.max_streams_per_tenant, settings.max_runs_per_tenant) == (50, 50)
        caps = [settings.tenant_cap(f"max_{k}_per_tenant") for k in ("streams", "runs")]
        assert caps == [2, 2]
        requests = "too many requests at once for this tenant (at most 2): retry later"
        second = {"message": "refund it", "sessionId": "third"}
        with Held(live, ACME, "a1"), Held(live, ACME, "a2"):  # acme at its limit
            too_many(acme.get("/agents"), 429, requests)  # its share of places is taken
            too_many(acme.post("/agents/shop/messages/stream", json=second), 429, requests)
            assert globex.get("/agents").status_code == 200  # the other tenant is served
            with Held(live, GLOBEX, "g1"), Held(live, GLOBEX, "g2"):  # both at the limit:
                full = "the server is serving all it can: retry later"  # every place is taken
                too_many(globex.get("/agents"), 503, full)
            assert globex.get("/agents").status_code == 200
        assert acme.get("/agents").status_code == 200


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({"request_timeout": 0}, "[server] request_timeout must be positive"),
        ({"idle_timeout": "5"}, "[server] idle_timeout must be a number (seconds)"),
        ({"max_runs_per_tenant": 0}, "[server] max_runs_per_tenant must be positive"),
        ({"max_streams_per_tenant": 1.5}, "[server] max_streams_per_tenant must be an integer"),
    ],
)
def test_bad_limits_are_configuration_errors(table: dict[str, Any], error: str) -> None:
    from loopwright.errors import ConfigError
    from loopwright.server import ServerSettings

    with pytest.raises(ConfigError) as raised:
        ServerSettings.from_project({"server": table})
    assert str(raised.value) == error
