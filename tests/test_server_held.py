"""Held streams over HTTP (issue 12): a client that keeps its `POST .../messages/stream` open
across an ask sees `approval:pending`, then — once the item is decided by another HTTP client,
the CLI in another process, or another server on the same log — `pending:decided`, the
resolution and the rest of the run, on the same stream, up to the real `done`. A client that
disconnects leaves a durable pause. Every `id:` is the seq of a committed event and any
`Last-Event-ID` replays the rest of the log. Session ids belong to (tenant, agent)."""

from __future__ import annotations

import getpass
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from loopwright import events as ev
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.store.log import SessionKey
from test_server import (
    PAUSED_RUN,
    RESUMED_RUN,
    LiveServer,
    body,
    check_full,
    make_project,
    served,
    serving,
    types,
)
from test_server_stream import Frames, as_logged, events_of, logged, stream, wait_logged

server = served("held")

LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
ASKED = [  # a refund's run up to its ask, on a held stream
    "session",
    "input:received",
    "step:started",
    "budget:check",
    "message:completed",
    "assistant:text",
    "approval:pending",
    "pending:requested",
]
WENT_ON = [  # ... and once it is decided (anywhere), in the same run
    "pending:decided",
    "approval:resolved",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:finished",
    "step:started",
    "budget:check",
    "message:completed",
    "step:finished",
    "loop:done",
    "done",
]


def until(reader: Frames, kind: str) -> list[dict[str, Any]]:
    """Frames up to the first event of type `kind` (`pending:requested`: the item is logged)."""
    read = reader.read(1)
    while read[-1]["event"]["type"] != kind:
        read += reader.read(1)
    return read


def logged_types(read: list[dict[str, Any]]) -> list[str]:
    return [t for t in types(events_of(read)) if not t.endswith(":delta")]


def went_on(read: list[dict[str, Any]], http: httpx.Client, by: str) -> dict[str, Any]:
    """The held stream carried the whole run, as logged; the decision's record."""
    assert logged_types(read) == [*ASKED, *WENT_ON]
    events = events_of(read)
    check_full(events, deltas=True)
    as_logged(read, logged(http, events[0]["sessionId"]))
    assert events[-1] == {
        "type": "done",
        "text": "Done: refunded 5 on A-1",
        "stopReason": "completed",
    }
    [decided] = [e for e in events if e["type"] == "pending:decided"]
    [resolved] = [e for e in events if e["type"] == "approval:resolved"]
    assert (decided["status"], decided["by"]) == ("approved", by)
    assert (resolved["id"], resolved["decision"], resolved["by"]) == (decided["id"], "approve", by)
    return decided


def test_a_held_stream_goes_on_after_an_approval_sent_by_another_client(
    http: httpx.Client, server: LiveServer
):
    with server.client() as other, stream(http, "refund A-1") as response:
        reader = Frames(response)
        read = until(reader, "pending:requested")
        sid, pid = read[0]["event"]["sessionId"], read[-1]["event"]["id"]
        shown = body(other.get(f"/agents/shop/sessions/{sid}"), 200)  # it waits, live
        assert (shown["status"], [p["id"] for p in shown["pending"]]) == ("running", [pid])
        approved = body(other.post(f"/approvals/{pid}/approve", json={"by": "bo"}), 200)
        read += reader.read()
    assert went_on(read, http, "loopback")["id"] == pid
    # the approver's answer is the turn's: the run it went on with, from its start
    assert (approved["text"], approved["sessionId"]) == ("Done: refunded 5 on A-1", sid)
    assert approved["events"] == [
        e["event"] for e in logged(http, sid) if e["event"]["type"] != "message:partial"
    ]
    again = body(http.post(f"/approvals/{pid}/deny"), 200)
    assert again == {
        "alreadyResolved": True,
        "id": pid,
        "status": "approved",
        "decidedBy": "loopback",  # the server's principal, not the body's `by`
        "sessionId": sid,
    }


def test_a_held_stream_goes_on_after_the_cli_approves(http: httpx.Client, server: LiveServer):
    with stream(http, "refund A-1") as response:
        reader = Frames(response)
        read = until(reader, "pending:requested")
        pid = read[-1]["event"]["id"]
        cli = subprocess.run(  # another process, on the same data directory
            [LOOPWRIGHT, "approvals", "approve", pid, "--by", "cli"],
            cwd=server.root,
            capture_output=True,
            text=True,
            timeout=120,  # a safety net
        )
        assert cli.returncode == 0, (cli.stdout, cli.stderr)
        read += reader.read()
    assert went_on(read, http, getpass.getuser())  # the terminal's user["id"] == pid


def test_a_decision_made_through_another_server_goes_on_in_the_held_stream(
    http: httpx.Client, server: LiveServer
):
    """Two servers on one log: the run is held by a client of the first; a client of the
    second decides it (that server follows the run in the log and answers once it ended), and
    a stream of the second replays and follows the same session."""
    second = LiveServer(create_app(load_project(server.root)))
    with second, second.client() as there, stream(http, "refund A-1") as response:
        reader = Frames(response)
        read = until(reader, "pending:requested")
        sid, pid = read[0]["event"]["sessionId"], read[-1]["event"]["id"]
        url = f"/agents/shop/sessions/{sid}/stream"
        with there.stream("GET", url, headers={"Last-Event-ID": "0"}) as followed:
            watcher = Frames(followed)
            assert logged_types(until(watcher, "pending:requested")) == ASKED
            answered = body(
                there.post(
                    f"/pending-approvals/{pid}/resolve", json={"decision": "approve", "by": "ops"}
                ),
                200,
            )
            rest = watcher.read()
        read += reader.read()
    went_on(read, http, "loopback")
    assert answered == {
        "text": "Done: refunded 5 on A-1",
        "sessionId": sid,
        "stopReason": "completed",
    }
    assert logged_types(rest) == WENT_ON  # from the log: every event with its seq
    assert all(f["id"] is not None for f in rest)
    as_logged(rest, logged(http, sid)[len(ASKED) :])


def test_an_approver_asking_for_a_stream_gets_the_run_going_on(
    http: httpx.Client, server: LiveServer
):
    with server.client() as other, stream(http, "refund A-1") as response:
        reader = Frames(response)
        read = until(reader, "pending:requested")
        pid = read[-1]["event"]["id"]
        sse = {"Accept": "text/event-stream"}
        with other.stream("POST", f"/approvals/{pid}/approve", headers=sse) as approving:
            continued = Frames(approving).read()
        read += reader.read()
    went_on(read, http, "loopback")
    assert logged_types(continued) == WENT_ON
    assert events_of(continued)[-1] == events_of(read)[-1]


def test_a_held_question_is_answered_through_the_v1_route(http: httpx.Client, server: LiveServer):
    with server.client() as other, stream(http, "ask me") as response:
        reader = Frames(response)
        read = until(reader, "pending:requested")
        sid, qid = read[0]["event"]["sessionId"], read[-1]["event"]["id"]
        answer = {"answer": "blue", "by": "ann"}
        answered = body(other.post(f"/pending-questions/{qid}/answer", json=answer), 200)
        read += reader.read()
    assert answered == {"text": "Done: blue", "sessionId": sid, "stopReason": "completed"}
    events = events_of(read)
    check_full(events, deltas=True)
    [resolved] = [e for e in events if e["type"] == "question:resolved"]
    assert (resolved["id"], resolved["answer"], resolved["by"]) == (qid, "blue", "loopback")
    assert types(events)[-2:] == ["loop:done", "done"] and "loop:paused" not in types(events)


def test_a_client_that_disconnects_leaves_a_durable_pause(http: httpx.Client, server: LiveServer):
    with stream(http, "refund A-1") as response:
        read = until(Frames(response), "pending:requested")
    sid, pid = read[0]["event"]["sessionId"], read[-1]["event"]["id"]
    # the run waited on its stream; with nobody following it, it pauses durably
    stored = wait_logged(server.root, SessionKey("default", "shop", sid), ev.Done.__instancecheck__)
    assert [s.event.type for s in stored if s.event.type != "message:partial"] == PAUSED_RUN
    assert stored[-1].event.stop_reason == "paused"
    shown = body(http.get(f"/agents/shop/sessions/{sid}"), 200)
    assert (shown["status"], [p["id"] for p in shown["pending"]]) == ("paused", [pid])
    done = body(http.post(f"/approvals/{pid}/approve"), 200)  # the run resumes
    assert (done["text"], done["stopReason"]) == ("Done: refunded 5 on A-1", "completed")
    assert types(done["events"]) == [*PAUSED_RUN, "pending:decided", *RESUMED_RUN]
    check_full(done["events"])


def test_a_server_stopped_while_a_client_holds_a_run_leaves_it_paused(tmp_path: Path):
    root = make_project(tmp_path / "shop")
    first = LiveServer(create_app(load_project(root))).__enter__()
    try:
        with first.client() as http, stream(http, "refund A-1") as response:
            read = until(Frames(response), "pending:requested")
            first.__exit__(None, None, None)  # stopped (gracefully) while the run waits
    finally:
        first.__exit__(None, None, None)
    sid, pid = read[0]["event"]["sessionId"], read[-1]["event"]["id"]
    with LiveServer(create_app(load_project(root))) as second, second.client() as http:
        shown = body(http.get(f"/agents/shop/sessions/{sid}"), 200)
        assert (shown["status"], [p["id"] for p in shown["pending"]]) == ("paused", [pid])
        done = body(http.post(f"/approvals/{pid}/approve"), 200)
    assert (done["text"], done["stopReason"]) == ("Done: refunded 5 on A-1", "completed")
    assert types(done["events"]) == [*PAUSED_RUN, "pending:decided", *RESUMED_RUN]


def test_every_last_event_id_replays_the_rest_of_the_log(http: httpx.Client, server: LiveServer):
    with server.hold("slow ids") as release, stream(http, "slow ids") as response:
        reader = Frames(response)
        read = reader.read(4)
        assert [(f["id"], f["event"]["type"]) for f in read] == [
            (1, "session"),
            (2, "input:received"),
            (None, "step:started"),  # not in the log yet (the model has not answered)
            (None, "budget:check"),
        ]
        release()
        read += reader.read()
    sid = read[0]["event"]["sessionId"]
    log = logged(http, sid)
    as_logged(read, log)
    assert "message:partial" in [e["event"]["type"] for e in log]  # stored, never streamed
    url = f"/agents/shop/sessions/{sid}/stream"
    for last in range(log[-1]["seq"] + 1):
        with http.stream("GET", url, headers={"Last-Event-ID": str(last)}) as response:
            replayed = Frames(response).read()
        assert [(f["id"], f["event"]) for f in replayed] == [
            (e["seq"], e["event"])
            for e in log
            if e["seq"] > last and e["event"]["type"] != "message:partial"
        ]


ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"


def test_a_session_id_belongs_to_its_tenant_and_agent(tmp_path: Path):
    """The same id under two agents and two tenants is four sessions; another tenant's id is
    answered exactly as an unused one (nothing tells a tenant it exists)."""
    toml = f'[auth.tokens]\n"{ACME}" = "acme"\n"{GLOBEX}" = "globex"\n'

    def client(live: LiveServer, token: str) -> httpx.Client:
        return live.client(headers={"Authorization": f"Bearer {token}"})

    def probe(http: httpx.Client, agent: str, sid: str) -> list[tuple[int, Any]]:
        """Every session route's answer for `sid` under `agent`."""
        url = f"/agents/{agent}/sessions/{sid}"
        gets = [http.get(url + path) for path in ("", "/events", "/stream", "/approvals")]
        posts = [http.post(url + path) for path in ("/cancel", "/compact", "/resume")]
        steer = http.post(url + "/steer", json={"message": "x"})
        return [(r.status_code, r.json()) for r in (*gets, *posts, steer)]

    with (
        serving(tmp_path / "shop", toml) as live,
        client(live, ACME) as acme,
        client(live, GLOBEX) as globex,
    ):
        unused = probe(globex, "shop", "order-1")
        assert unused[0] == (404, {"error": "no session 'order-1' for agent 'shop'"})
        paused = body(
            acme.post(
                "/agents/shop/messages", json={"message": "refund A-1", "sessionId": "order-1"}
            ),
            202,
        )
        pid = paused["id"]
        greeted = acme.post(
            "/agents/greeter/messages", json={"message": "hi", "sessionId": "order-1"}
        )
        assert body(greeted, 200)["text"] == "Hello there!"  # another agent's session (no 409)
        assert probe(globex, "shop", "order-1") == unused  # a foreign id reads as an unused one
        guessed = body(globex.post("/approvals/apr_never_used/approve"), 404)
        foreign = body(globex.post(f"/approvals/{pid}/approve"), 404)
        assert foreign == {"error": guessed["error"].replace("apr_never_used", pid)}
        mine = globex.post(
            "/agents/shop/messages", json={"message": "hello", "sessionId": "order-1"}
        )
        assert body(mine, 200)["text"] == "heard: hello"  # globex's own order-1
        listed = {
            (name, token): [
                (s["id"], s["agent"], s["status"])
                for s in body(who.get(f"/agents/{name}/sessions"), 200)["sessions"]
            ]
            for name in ("shop", "greeter")
            for token, who in (("acme", acme), ("globex", globex))
        }
        assert listed == {
            ("shop", "acme"): [("order-1", "shop", "paused")],
            ("shop", "globex"): [("order-1", "shop", "idle")],
            ("greeter", "acme"): [("order-1", "greeter", "idle")],
            ("greeter", "globex"): [],
        }
        histories = {
            (agent, token): [
                m.get("content")
                for m in body(who.get(f"/agents/{agent}/sessions/order-1"), 200)["history"]
                if m["role"] == "user"
            ]
            for agent, token, who in (
                ("shop", "acme", acme),
                ("greeter", "acme", acme),
                ("shop", "globex", globex),
            )
        }
        assert histories == {
            ("shop", "acme"): ["refund A-1"],
            ("greeter", "acme"): ["hi"],
            ("shop", "globex"): ["hello"],
        }
        assert [i["id"] for i in body(globex.get("/pending"), 200)["items"]] == []
        done = body(acme.post(f"/approvals/{pid}/approve"), 200)
        assert (done["text"], done["sessionId"]) == ("Done: refunded 5 on A-1", "order-1")
        assert body(acme.get("/agents/greeter/sessions/order-1"), 200)["status"] == "idle"
