"""loopengine v1 clients (base URL `…/v1`) at the two doors where v1 differs from our own
profile: a decision made while the client still holds the turn's stream is answered with the
run that went on, one `session … done` (as v1 answers with the turn so far), and a message to a
session paused on open items is taken — the items are superseded (an approval denied, its batch
closed; a question answered as unanswered), recorded as decided by the caller — where the full
profile still answers 409."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import V1
from live_server import LiveServer, serving
from loopwright.server.routes import SUPERSEDED, UNANSWERED
from test_server import body, types
from test_server_stream import Frames, events_of


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory.mktemp("v1doors") / "shop") as server:
        yield server


def decided(http: httpx.Client, sid: str) -> list[tuple[Any, ...]]:
    events = body(http.get(f"/agents/shop/sessions/{sid}/events"), 200)["events"]
    return [
        (e["event"]["status"], e["event"]["by"], e["event"].get("reason"))
        for e in events
        if e["event"]["type"] == "pending:decided"
    ]


def test_a_decision_while_the_client_holds_the_stream_answers_one_session_to_done(
    live: LiveServer,
) -> None:
    with live.client() as http, live.client() as other:
        sent = {"message": "refund A-1", "sessionId": "held"}
        with http.stream("POST", "/v1/agents/shop/messages/stream", json=sent) as response:
            reader = Frames(response)
            read = reader.read(1)
            while read[-1]["event"]["type"] != "approval:pending":
                read += reader.read(1)
            approved = body(other.post(f"/v1/approvals/{read[-1]['event']['id']}/approve"), 200)
            read += reader.read()
    streamed = events_of(read)
    for event in [*streamed, *approved["events"]]:
        V1.validate(event)
    assert approved["events"] == streamed  # the turn so far: the run that went on, whole
    assert types(approved["events"]) == [
        "session",
        "budget:check",
        "assistant:text",
        "approval:pending",
        "actauth:decision",
        *("tool:started", "toollane:result", "tool:result", "budget:check", "loop:done"),
        "done",
    ]
    assert approved["text"] == "Done: refunded 5 on A-1"


def test_a_v1_message_supersedes_the_open_items_of_a_paused_session(live: LiveServer) -> None:
    with live.client() as http:
        paused = body(http.post("/v1/agents/shop/messages", json={"message": "two refunds"}), 202)
        sid = paused["sessionId"]
        again = {"message": "never mind", "sessionId": sid}
        refused = body(http.post("/agents/shop/messages", json=again), 409)  # (full profile)
        assert "is paused on pending items" in refused["error"]
        taken = body(http.post("/v1/agents/shop/messages", json=again), 200)
        assert (taken["text"], types(taken["events"])) == (
            "heard: two refunds | never mind",
            ["session", "budget:check", "loop:done", "done"],
        )
        first = paused["id"]
        assert decided(http, sid) == [
            ("denied", "loopback", SUPERSEDED),
            ("skipped", f"closed by {first}", None),
        ]
        shown = body(http.get(f"/agents/shop/sessions/{sid}"), 200)
        assert (shown["status"], shown["pending"]) == ("idle", [])

        asked = body(http.post("/v1/agents/shop/messages", json={"message": "ask me"}), 202)
        sid = asked["sessionId"]
        taken = body(http.post("/v1/agents/shop/messages", json={**again, "sessionId": sid}), 200)
        assert taken["text"] == "heard: ask me | never mind"
        assert decided(http, sid) == [("answered", "loopback", None)]
        history = body(http.get(f"/v1/agents/shop/sessions/{sid}"), 200)["history"]
        [result] = history[2]["content"]
        assert (result["type"], result["content"]) == ("tool_result", UNANSWERED)
