"""`loopwright serve` and `loopwright dev` as a person runs them: the URL is printed, the API
answers, SIGINT and SIGTERM stop the server cleanly, and `dev` serves an agent's new
instructions (or keeps the old ones while a file is broken) without a restart."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from test_cli import LOOPWRIGHT
from test_server import make_project

SAFETY = 60
"""Seconds after which a wait fails the test instead of hanging it (no test waits that long)."""
ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}


class Served:
    """A `loopwright serve|dev` process; its stderr lines are collected as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [LOOPWRIGHT, *args, "--port", "0"],
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.process.stderr is not None
        stderr = self.process.stderr
        self.reader = threading.Thread(target=lambda: [self.lines.put(x) for x in stderr])
        self.reader.start()
        self.url = re.search(r"^playground: (\S+)/playground$", self.wait_for("playground: "))[1]  # type: ignore[index]

    def wait_for(self, text: str, timeout: float = SAFETY) -> str:
        """The next line with `text` (the timeout is a safety net: a line that never comes
        fails the test instead of hanging it)."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.seen:
                if text in line:
                    self.seen.remove(line)
                    return line.rstrip("\n")
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} in {self.seen}"
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.lines.get(timeout=remaining))

    def stop(self, sig: int) -> int:
        self.process.send_signal(sig)
        return self.process.wait(SAFETY)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.reader.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


@pytest.fixture
def served(project: Path) -> Iterator[Served]:
    server = Served("serve", "--project", str(project))
    yield server
    server.kill()


def test_serve_prints_its_url_answers_and_stops_on_sigint(served: Served, project: Path):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", served.url)
    with httpx.Client(base_url=served.url, timeout=SAFETY) as http:
        assert http.get("/health").json()["ok"] is True
        names = [a["name"] for a in http.get("/agents").json()["agents"]]
        assert names == ["desk", "greeter", "shop"]
        reply = http.post("/agents/greeter/messages", json={"message": "hi"}).json()
        assert reply["text"] == "Hello there!"
    assert served.stop(signal.SIGINT) == 0
    served.wait_for("loopwright: stopped")
    assert (project / ".loopwright" / "loopwright.db").is_file()


def replace(path: Path, text: str) -> None:
    """Write a file in one step (a rename), so that no reload reads it half written."""
    part = path.with_name(path.name + "~")  # a name the watcher ignores
    part.write_text(text)
    os.replace(part, path)


def reloaded_until(server: Served, serves: Callable[[], bool]) -> None:
    """Wait for the server's reloads until it `serves()` what was written (a change may come
    in more than one batch, each with its reload)."""
    while not serves():
        server.wait_for("reloaded: 3 agent(s): desk, greeter, shop")


def test_dev_reloads_an_agent_when_its_files_change(project: Path):
    server = Served("dev", "--project", str(project))
    try:

        def prompt() -> object:
            greeter = httpx.get(f"{server.url}/agents/greeter/config", timeout=SAFETY)
            return greeter.json()["systemPrompt"]

        def shop_denies() -> bool:
            shop = httpx.get(f"{server.url}/agents/shop/config", timeout=SAFETY).json()
            return bool(shop["permissions"]["defaultDecision"] == "deny")

        assert prompt() == "Greet people."  # (served: the watcher is watching)
        agent_yaml = project / "agents" / "greeter" / "agent.yaml"
        original = agent_yaml.read_text()
        replace(agent_yaml, original.replace("Greet people.", "Greet people warmly."))
        reloaded_until(server, lambda: prompt() == "Greet people warmly.")
        replace(agent_yaml, original + "unknown_key: 1\n")
        failed = server.wait_for("reload failed, still serving the previous version")
        assert "agent.yaml:4: unknown_key: Extra inputs are not permitted" in failed
        assert prompt() == "Greet people warmly."
        replace(project / "agents" / "shop" / "rules.yaml", "default_decision: deny\n")
        replace(agent_yaml, original)
        reloaded_until(server, lambda: prompt() == "Greet people." and shop_denies())
        assert server.stop(signal.SIGTERM) == 0
        server.wait_for("loopwright: stopped")
    finally:
        server.kill()


def test_stopping_ends_open_event_streams_cleanly(served: Served):
    """An endless stream (`GET /lifecycle`; the playground always holds one) ends with the
    chunked body's last chunk as the server begins to stop: the client reads a complete
    response (a cut connection would raise `RemoteProtocolError` after the shutdown's grace
    seconds), and the server stops at once rather than waiting on the stream."""
    with (
        httpx.Client(base_url=served.url, timeout=SAFETY) as http,
        http.stream("GET", "/lifecycle") as stream,
    ):
        assert (stream.status_code, stream.headers["content-type"]) == (
            200,
            "text/event-stream; charset=utf-8",
        )
        served.process.send_signal(signal.SIGINT)
        body = "".join(stream.iter_text())  # (ends, and raises nothing)
    assert body.replace(": keep-alive\n\n", "") == ""
    assert served.process.wait(SAFETY) == 0
    served.wait_for("loopwright: stopped")


def test_a_busy_port_and_bad_settings_are_usage_errors(served: Served, project: Path):
    port = served.url.rsplit(":", 1)[1]
    out = subprocess.run(
        [LOOPWRIGHT, "serve", "--project", str(project), "--port", port],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr
    (project / "loopwright.toml").write_text('[server]\nport = "eighty"\n')
    out = subprocess.run(
        [LOOPWRIGHT, "serve", "--project", str(project)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert out.returncode == 2
    assert out.stderr.splitlines()[0].endswith(
        "loopwright.toml:2: [server] port: input should be a valid integer"
    )


def test_an_approval_outlives_the_server_that_paused_the_run(project: Path):
    """P4: a pending item is durable state, not process memory. One server pauses a run and is
    killed (SIGKILL, nothing cleaned up); a new server process approves it, and the run ends."""
    first = Served("serve", "--project", str(project))
    try:
        with httpx.Client(base_url=first.url, timeout=SAFETY) as http:
            paused = http.post("/agents/shop/messages", json={"message": "refund A-1"})
        assert paused.status_code == 202
    finally:
        first.process.send_signal(signal.SIGKILL)
        first.kill()
    sid, pid = paused.json()["sessionId"], paused.json()["id"]
    second = Served("serve", "--project", str(project))
    try:
        with httpx.Client(base_url=second.url, timeout=SAFETY) as http:
            [listed] = http.get("/pending").json()["items"]
            assert (listed["id"], listed["sessionId"], listed["tool"]) == (pid, sid, "refund")
            done = http.post(f"/approvals/{pid}/approve", json={"by": "ana"})
            assert done.status_code == 200, done.text
            assert (done.json()["text"], done.json()["stopReason"]) == (
                "Done: refunded 5 on A-1",
                "completed",
            )
            again = http.post(f"/approvals/{pid}/approve")
            assert again.json() | {"sessionId": sid} == {
                "alreadyResolved": True,
                "id": pid,
                "status": "approved",
                "decidedBy": "loopback",  # the door's principal, not the body's by
                "sessionId": sid,
            }
            assert http.get("/pending").json()["items"] == []
    finally:
        second.kill()


def test_connections_past_the_limit_are_answered_503(tmp_path: Path):
    """P10: `[server] max_connections` bounds what is served at once; past it, 503."""
    root = make_project(tmp_path / "shop", "[server]\nmax_connections = 2\n")
    server = Served("serve", "--project", str(root))
    try:
        with httpx.Client(base_url=server.url, timeout=SAFETY) as three:
            held = [stream_held(server.url, "slow one"), stream_held(server.url, "slow two")]
            try:
                assert three.get("/health").status_code == 503
            finally:
                for connection in held:
                    let_go(connection)
            assert three.get("/health").status_code == 200
    finally:
        server.kill()


def stream_held(url: str, message: str) -> socket.socket:
    """A streamed run's request on a connection of its own, answered 200: it holds a place."""
    host, port = url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=SAFETY)
    data = json.dumps({"message": message}).encode()
    head = f"POST /agents/shop/messages/stream HTTP/1.1\r\nhost: {host}\r\n"
    head += f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    connection.sendall(head.encode() + data)
    status = b""
    while len(status) < 12 and (part := connection.recv(12 - len(status))):
        status += part
    assert status == b"HTTP/1.1 200"
    return connection


def let_go(connection: socket.socket) -> None:
    """Close the connection from this end, then read until the server has closed its end:
    by then the server has forgotten it (asyncio calls connection_lost, then closes)."""
    connection.shutdown(socket.SHUT_WR)
    while connection.recv(65536):
        pass
    connection.close()
