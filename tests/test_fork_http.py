"""`POST /agents/{name}/sessions/{id}/fork` on a real server (uvicorn on loopback) over a SQLite
file and over PostgreSQL: 201 with the new session's id and lineage, the lineage in the session's
body and the listing, the fork's approval decided differently, a fork mid-conversation going on,
the source's log and body unchanged; 404 for unknown and foreign sessions, 422 for a seq out of
range, 409 for an id in use, 400 for a bad body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, make_project
from loopwright.project import load_project
from loopwright.server import create_app
from test_server import body

ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"
TOKENS = f'[auth.tokens]\n"{ACME}" = "acme"\n"{GLOBEX}" = "globex"\n'


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    store = ""
    if request.param == "postgres":
        store = f'[store]\nurl = "{request.getfixturevalue("pg_url")}"\n'
    root = make_project(tmp_path / "shop", TOKENS + store)
    with LiveServer(create_app(load_project(root))) as live:
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(headers={"Authorization": f"Bearer {ACME}"}) as client:
        yield client


def events(http: httpx.Client, sid: str) -> list[dict[str, Any]]:
    return list(body(http.get(f"/agents/shop/sessions/{sid}/events"), 200)["events"])


def test_a_fork_over_http_is_decided_differently_and_shown_with_its_lineage(http: httpx.Client):
    paused = body(http.post("/agents/shop/messages", json={"message": "refund A-1"}), 202)
    sid = paused["sessionId"]
    shown, logged = body(http.get(f"/agents/shop/sessions/{sid}"), 200), events(http, sid)
    assert shown["forkedFrom"] is None
    last = shown["lastSeq"]
    made = body(http.post(f"/agents/shop/sessions/{sid}/fork", json={"sessionId": "what-if"}), 201)
    assert made == {
        "sessionId": "what-if",
        "agent": "shop",
        "status": "paused",
        "lastSeq": last,
        "forkedFrom": {"session": sid, "seq": last},
    }
    fork = body(http.get("/agents/shop/sessions/what-if"), 200)
    assert fork["forkedFrom"] == {"session": sid, "seq": last}
    assert fork["history"] == shown["history"]
    [mine], [theirs] = fork["pending"], shown["pending"]
    assert mine["id"] != theirs["id"] and mine["args"] == theirs["args"]
    denied = body(http.post(f"/approvals/{mine['id']}/deny", json={"reason": "not today"}), 200)
    assert denied["stopReason"] == "denied"
    listed = body(http.get("/agents/shop/sessions"), 200)["sessions"]
    assert [(s["id"], s["forkedFrom"]) for s in listed] == [
        ("what-if", {"session": sid, "seq": last}),
        (sid, None),
    ]
    assert body(http.get(f"/agents/shop/sessions/{sid}"), 200) == shown  # the source: as it was
    assert events(http, sid) == logged
    approved = body(http.post(f"/approvals/{theirs['id']}/approve", json={}), 200)
    assert approved["text"] == "Done: refunded 5 on A-1"


def test_a_fork_mid_conversation_goes_on_from_there(http: httpx.Client):
    first = body(http.post("/agents/shop/messages", json={"message": "one"}), 200)
    sid = first["sessionId"]
    at = body(http.get(f"/agents/shop/sessions/{sid}"), 200)["lastSeq"]
    body(http.post("/agents/shop/messages", json={"message": "two", "sessionId": sid}), 200)
    made = body(http.post(f"/agents/shop/sessions/{sid}/fork", json={"at": at}), 201)
    new = made["sessionId"]
    assert (made["lastSeq"], made["forkedFrom"], made["status"]) == (
        at,
        {"session": sid, "seq": at},
        "idle",
    )
    copied, source = events(http, new), events(http, sid)[:at]
    assert [e["seq"] for e in copied] == list(range(1, at + 1))
    assert [e["event"] for e in copied[1:]] == [e["event"] for e in source[1:]]
    went_on = body(
        http.post("/agents/shop/messages", json={"message": "three", "sessionId": new}), 200
    )
    assert went_on["text"] == "heard: one | three"
    again = body(
        http.post("/agents/shop/messages", json={"message": "four", "sessionId": sid}), 200
    )
    assert again["text"] == "heard: one | two | four"


def test_bad_forks_are_answered_clearly(server: LiveServer, http: httpx.Client):
    sid = body(http.post("/agents/shop/messages", json={"message": "one"}), 200)["sessionId"]
    last = body(http.get(f"/agents/shop/sessions/{sid}"), 200)["lastSeq"]
    url = f"/agents/shop/sessions/{sid}/fork"
    for at in (0, last + 1):
        assert body(http.post(url, json={"at": at}), 422) == {
            "error": f"seq {at} is not in session '{sid}' (its events are 1..{last})"
        }
    for bad in ({"at": "3"}, {"at": True}, {"at": 1.5}):
        assert body(http.post(url, json=bad), 400) == {
            "error": "at must be an integer: a seq of the session"
        }
    assert body(http.post(url, json={"sessionId": sid}), 409) == {
        "error": f"session id '{sid}' is in use"
    }
    assert body(http.post(url, content=b"[1]"), 400) == {
        "error": "the request body must be a JSON object"
    }
    assert body(http.post("/agents/shop/sessions/nope/fork"), 404) == {
        "error": "no session 'nope' for agent 'shop'"
    }
    with server.client(headers={"Authorization": f"Bearer {GLOBEX}"}) as globex:
        assert body(globex.post(url), 404) == {"error": f"no session '{sid}' for agent 'shop'"}
        assert body(globex.get("/agents/shop/sessions"), 200)["sessions"] == []
    assert [s["id"] for s in body(http.get("/agents/shop/sessions"), 200)["sessions"]] == [sid]
