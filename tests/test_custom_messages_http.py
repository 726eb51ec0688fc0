"""`POST /agents/{name}/sessions/{id}/messages` on a real server (uvicorn on loopback) over a
SQLite file and over PostgreSQL: 201 with the logged `message:custom` and its seq; the full
profile's history and events show it, the v1 profile's history does not and v1 has no such
route; 404 for unknown and foreign sessions, 400 for a bad body; the next run's model request
does not carry it, and `loopwright sessions show` prints it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from live_server import LiveServer, make_project
from loopwright.project import load_project
from loopwright.server import create_app
from test_readme import ENV, LOOPWRIGHT
from test_server import body

ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"
TOKENS = f'[auth.tokens]\n"{ACME}" = "acme"\n"{GLOBEX}" = "globex"\n'
NOTE = {"kind": "note", "content": "opened the billing tab", "data": {"tab": 2}}
CUSTOM = {"role": "custom", **NOTE}


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    store = ""
    if request.param == "postgres":
        store = f'[store]\nurl = "{request.getfixturevalue("pg_url")}"\n'
    root = make_project(tmp_path / "shop", TOKENS + store)
    with LiveServer(create_app(load_project(root))) as live:
        live.root = root
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(headers={"Authorization": f"Bearer {ACME}"}) as client:
        yield client


def test_a_custom_message_over_http_is_logged_shown_and_kept_from_the_model(
    server: LiveServer, http: httpx.Client
):
    done = body(http.post("/agents/greeter/messages", json={"message": "hi"}), 200)
    sid = done["sessionId"]
    before = body(http.get(f"/agents/greeter/sessions/{sid}"), 200)["lastSeq"]
    added = body(http.post(f"/agents/greeter/sessions/{sid}/messages", json=NOTE), 201)
    assert added == {"seq": before + 1, "event": {"type": "message:custom", "message": CUSTOM}}

    shown = body(http.get(f"/agents/greeter/sessions/{sid}"), 200)
    assert [m["role"] for m in shown["history"]] == ["user", "assistant", "custom"]
    assert shown["history"][2] == CUSTOM
    logged = body(http.get(f"/agents/greeter/sessions/{sid}/events"), 200)["events"]
    assert logged[-1]["event"] == {"type": "message:custom", "message": CUSTOM}

    v1 = body(http.get(f"/v1/agents/greeter/sessions/{sid}"), 200)
    assert v1["history"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello there!"}]},
    ]
    v1_events = body(http.get(f"/v1/agents/greeter/sessions/{sid}/events"), 200)["events"]
    assert "message:custom" not in [e["event"]["type"] for e in v1_events]
    refused = http.post(f"/v1/agents/greeter/sessions/{sid}/messages", json=NOTE)
    assert body(refused, 404) == {"error": "custom messages are on the full profile only"}

    again = body(
        http.post("/agents/greeter/messages", json={"message": "again", "sessionId": sid}), 200
    )
    assert again["text"] == "Hello again!"
    history = body(http.get(f"/agents/greeter/sessions/{sid}"), 200)["history"]
    assert [m["role"] for m in history] == ["user", "assistant", "custom", "user", "assistant"]

    where = ["--agent", "greeter", "--tenant", "acme", "--project", str(server.root)]
    shown_cli = subprocess.run(
        [LOOPWRIGHT, "sessions", "show", sid, *where],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown_cli.returncode == 0, shown_cli.stderr
    assert shown_cli.stdout.splitlines()[1:-1] == [  # (its header and usage line aside)
        "user: hi",
        "assistant: Hello there!",
        "-- run completed",
        "  [note] opened the billing tab",
        "user: again",
        "assistant: Hello again!",
        "-- run completed",
    ]


def test_bad_custom_messages_are_answered_clearly(http: httpx.Client, server: LiveServer):
    sid = body(http.post("/agents/greeter/messages", json={"message": "hi"}), 200)["sessionId"]
    url = f"/agents/greeter/sessions/{sid}/messages"
    assert body(http.post("/agents/greeter/sessions/nope/messages", json=NOTE), 404) == {
        "error": "no session 'nope' for agent 'greeter'"
    }
    with server.client(headers={"Authorization": f"Bearer {GLOBEX}"}) as other:
        assert body(other.post(url, json=NOTE), 404) == {
            "error": f"no session '{sid}' for agent 'greeter'"
        }
    assert body(http.post(url, json={"content": "x"}), 400) == {"error": "kind is required"}
    assert body(http.post(url, json={"kind": "n", "data": [1]}), 400) == {
        "error": "data must be a JSON object"
    }
    assert body(http.post(url, json={"kind": "n", "content": 3}), 400) == {
        "error": "content must be a string"
    }
    history = body(http.get(f"/agents/greeter/sessions/{sid}"), 200)["history"]
    assert [m["role"] for m in history] == ["user", "assistant"]  # nothing was added
