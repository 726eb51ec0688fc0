"""`loopwright sessions watch --url URL --token T`: a real `loopwright` process following a real
server's `GET /lifecycle` (test_server_security's, with tenants), one exact line per
notification (JSON lines with --json), the token's tenant only, `--agent` filtering; it ends on
Ctrl-C with status 0. The test waits on the command's output, never on time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from live_server import LiveServer
from reaper import Reaper
from test_server_security import ACME, GLOBEX, acme, globex, server  # noqa: F401 (fixtures)

LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))


@contextmanager
def watching(url: str, *flags: str) -> Iterator[subprocess.Popen[str]]:
    """`sessions watch` on `url`, once it says it is watching (subscribed: the server made the
    subscription before it answered); stopped with Ctrl-C (SIGINT) at the end."""
    process = subprocess.Popen(
        [LOOPWRIGHT, "sessions", "watch", "--url", url, *flags],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reaper = Reaper(process)
    try:
        assert process.stderr is not None
        said = process.stderr.readline()
        assert said == f"watching {url}/lifecycle (Ctrl-C to stop)\n", said + process.stderr.read()
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=30) == 0, process.communicate()
        finally:
            reaper.stop()
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()


def lines(process: subprocess.Popen[str], count: int) -> list[str]:
    assert process.stdout is not None
    return [process.stdout.readline().rstrip("\n") for _ in range(count)]


def test_watch_prints_the_tenants_notifications_one_line_each(
    server: LiveServer,  # noqa: F811
    acme: httpx.Client,  # noqa: F811
    globex: httpx.Client,  # noqa: F811
):
    with (
        watching(server.url, "--token", ACME) as human,
        watching(server.url, "--token", ACME, "--json") as as_json,
        watching(server.url, "--token", ACME, "--agent", "shop") as shop_only,
    ):
        sent = globex.post("/agents/shop/messages", json={"message": "hi", "sessionId": "w-0"})
        assert sent.status_code == 200, sent.text  # another tenant's: never seen here
        sent = acme.post("/agents/greeter/messages", json={"message": "hi", "sessionId": "w-1"})
        assert sent.status_code == 200, sent.text
        sent = acme.post("/agents/shop/messages", json={"message": "hello", "sessionId": "w-2"})
        assert sent.status_code == 200, sent.text
        assert lines(human, 6) == [
            "greeter w-1 created",
            "greeter w-1 running",
            "greeter w-1 idle (was running)",
            "shop w-2 created",
            "shop w-2 running",
            "shop w-2 idle (was running)",
        ]
        assert lines(shop_only, 3) == [
            "shop w-2 created",
            "shop w-2 running",
            "shop w-2 idle (was running)",
        ]
        named = {"tenant": "acme", "agent": "greeter", "sessionId": "w-1"}
        assert [json.loads(line) for line in lines(as_json, 3)] == [
            {**named, "type": "session:created"},
            {**named, "status": "running", "type": "session:status"},
            {**named, "status": "idle", "previous": "running", "type": "session:status"},
        ]


def test_watch_without_a_valid_token_fails_with_the_servers_answer(
    server: LiveServer,  # noqa: F811
):
    done = subprocess.run(
        [LOOPWRIGHT, "sessions", "watch", "--url", server.url, "--token", "wrong"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith(f"loopwright: error: GET {server.url}/lifecycle answered 401: "), first
