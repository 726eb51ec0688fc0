"""A cancel and a steer sent to one server for a run that executes on another (two servers on one
log: a SQLite file, or a PostgreSQL database): the request reaches the run through the log's
controls, the run applies it exactly as it would its own server's — the run's log is event for
event the log of the same run steered (or cancelled) through its own server — and the answer
says it landed. The run's model waits on a gate the test opens (`LiveServer.hold`), so the run
is in progress for as long as the test needs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, make_project
from loopwright.project import load_project
from loopwright.server import create_app
from test_server import body, check_full, types
from test_server_stream import Frames, as_logged, events_of, logged, stream


@pytest.fixture(params=["sqlite", "postgres"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LiveServer, ...]]:
    """Two servers of one project on one log: the project's SQLite file, or PostgreSQL."""
    toml = ""
    if request.param == "postgres":
        toml = f'[store]\nurl = "{request.getfixturevalue("pg_url")}"\n'
    root = make_project(tmp_path / "shop", toml)
    here, there = (LiveServer(create_app(load_project(root))) for _ in range(2))
    with here, there:
        yield here, there


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [kind for kind in types(events) if not kind.endswith(":delta")]


def logged_kinds(log: list[dict[str, Any]]) -> list[str]:
    """A log's types, without the partial replies a slow model's wait may leave."""
    return [e["event"]["type"] for e in log if e["event"]["type"] != "message:partial"]


def steered(server: LiveServer, http: httpx.Client, by: httpx.Client, message: str) -> Any:
    """A run of `message` on `server` (through `http`), steered through `by` while its model
    waits: (its streamed events, its log, the session)."""
    with server.hold(message) as release, stream(http, message) as response:
        reader = Frames(response)
        read = reader.read(1)
        sid = read[0]["event"]["sessionId"]
        url = f"/agents/shop/sessions/{sid}"
        assert body(by.get(url), 200)["status"] == "running"
        answer = by.post(f"{url}/steer", json={"message": "also this"})
        assert body(answer, 202) == {"queued": True}  # the run took it
        release()
        read += reader.read()
    events = events_of(read)
    check_full(events, deltas=True)
    return events, logged(by, sid), sid


def cancelled(server: LiveServer, http: httpx.Client, by: httpx.Client, message: str) -> Any:
    """A run of `message` on `server`, cancelled through `by` while its model waits."""
    with server.hold(message), stream(http, message) as response:
        reader = Frames(response)
        read = reader.read(1)
        sid = read[0]["event"]["sessionId"]
        answer = by.post(f"/agents/shop/sessions/{sid}/cancel")
        assert body(answer, 200) == {"cancelled": True}  # it ended cancelled
        read += reader.read()
    events = events_of(read)
    check_full(events, deltas=True)
    as_logged(read, logged(by, sid))
    return events, logged(by, sid), sid


def test_a_steer_sent_to_another_server_reaches_the_run(servers: tuple[LiveServer, ...]) -> None:
    here, there = servers
    with here.client() as http, there.client() as other:
        events, log, sid = steered(here, http, other, "steer me")
        local_events, local_log, _ = steered(here, http, http, "steer me here")
        assert kinds(events) == kinds(local_events)  # exactly as a steer sent to its server
        assert logged_kinds(log) == logged_kinds(local_log)
        order = logged_kinds(log)
        assert order.index("steering:queued") < order.index("steering:injected")
        [queued] = [e["event"] for e in log if e["event"]["type"] == "steering:queued"]
        assert (queued["mode"], queued["text"]) == ("steer", "also this")
        [injected] = [e for e in events if e["type"] == "steering:injected"]
        assert (injected["mode"], injected["message"]["content"]) == ("steer", "also this")
        assert events[-1] == {
            "type": "done",
            "text": "heard: steer me | also this",
            "stopReason": "completed",
        }
        late = other.post(f"/agents/shop/sessions/{sid}/steer", json={"message": "late"})
        assert body(late, 409) == {
            "error": f"session {sid} has no run in progress: send it a message"
        }


def test_a_cancel_sent_to_another_server_stops_the_run(servers: tuple[LiveServer, ...]) -> None:
    here, there = servers
    with here.client() as http, there.client() as other:
        events, log, sid = cancelled(here, http, other, "cancel me")
        local_events, local_log, _ = cancelled(here, http, http, "cancel me here")
        assert kinds(events) == kinds(local_events)  # exactly as a cancel sent to its server
        assert logged_kinds(log) == logged_kinds(local_log)
        assert kinds(events)[:4] == ["session", "input:received", "step:started", "budget:check"]
        assert kinds(events)[-2:] == ["loop:aborted", "done"]
        assert events[-1] == {"type": "done", "text": "Cancelled.", "stopReason": "aborted"}
        url = f"/agents/shop/sessions/{sid}"
        assert body(other.post(f"{url}/cancel"), 200) == {"cancelled": False}  # none runs
        again = other.post("/agents/shop/messages", json={"message": "hi", "sessionId": sid})
        assert body(again, 200)["text"] == "heard: cancel me | hi"  # the session goes on
