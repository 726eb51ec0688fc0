"""The HTTP server through a real uvicorn on loopback: the v1 routes' bodies and status codes,
the 202 → approve → 200 chain, deny with skipped siblings, questions, listings and sessions.
Every event body is checked: full streams against the generated schema and the grammar,
`profile=v1` ones against the loopengine v1 schema. The helpers here (and live_server.py's,
re-exported) serve the other test_server_*.py files too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from conftest import ROOT, V1
from live_server import LiveServer, make_project, served, serving
from loopwright.testing import check_events
from loopwright.wire import loads

__all__ = ["LiveServer", "make_project", "served", "serving"]  # (for the test_server_*.py)

server = served("server")


# ---- checks -------------------------------------------------------------------------------


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


FULL = Draft202012Validator(json.loads((ROOT / "protocol" / "loop-event.schema.json").read_text()))


def check_full(events: list[dict[str, Any]], *, deltas: bool = False) -> None:
    """Each event valid in the committed schema of the whole vocabulary, and each run
    (`session` … `done`) grammatical; between runs only decisions (`pending:decided`, logged
    when an item of a paused run is decided, before the run resumes)."""
    for data in events:
        FULL.validate(data)
    runs: list[list[Any]] = []
    ended = True
    for data in events:
        if data["type"] == "session":
            runs.append([])
            ended = False
        elif ended:
            assert data["type"] == "pending:decided", f"{data['type']} outside a run"
            continue
        runs[-1].append(loads(data))
        ended = data["type"] == "done"
    assert runs, "no run in the events"
    for run in runs:
        check_events(run)
    if not deltas:
        assert not [e for e in events if e["type"].endswith(":delta")]


def check_v1(events: list[dict[str, Any]]) -> None:
    for data in events:
        V1.validate(data)
    assert events[0]["type"] == "session" and events[-1]["type"] == "done"


def body(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


PAUSED_RUN = [
    "session",
    "input:received",
    "step:started",
    "budget:check",
    "message:completed",
    "assistant:text",
    "approval:pending",
    "pending:requested",
    "actauth:decision",
    "step:finished",
    "loop:paused",
    "done",
]
RESUMED_RUN = [
    "session",
    "approval:resolved",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:started",
    "budget:check",
    "message:completed",
    "step:finished",
    "loop:done",
    "done",
]


# ---- tests --------------------------------------------------------------------------------


def test_health_agents_and_config(http: httpx.Client):
    from loopwright.server import version

    assert body(http.get("/health"), 200) == {"ok": True, "version": version()}
    assert body(http.get("/agents"), 200) == {
        "agents": [
            {
                "name": "desk",
                "systemPrompt": "",
                "description": "The front desk.",
                "model": "scripted:agents/desk/script.yaml",
            },
            {
                "name": "greeter",
                "systemPrompt": "Greet people.",
                "description": "Says hello.",
                "model": "scripted:agents/greeter/script.yaml",
            },
            {
                "name": "shop",
                "systemPrompt": "You refund orders.",
                "description": "Refunds orders (a human approves each refund).",
                "model": "custom",
            },
        ]
    }
    config = body(http.get("/agents/shop/config"), 200)
    refund = {
        "name": "refund",
        "description": "Refund an order.",
        "gated": True,
        "subagent": False,
    }
    assert {k: config["tools"][0][k] for k in refund} == refund
    assert config["tools"][0]["input_schema"]["required"] == ["order", "amount"]
    assert [t["name"] for t in config["tools"]] == ["refund", "ask_user"]
    limits = ("name", "maxTurns", "onDeny", "contextBudgetTokens", "skillIndexBudgetTokens")
    assert {k: config[k] for k in limits} == {
        "name": "shop",
        "maxTurns": 25,
        "onDeny": "stop",
        "contextBudgetTokens": 100_000,  # (what a run uses: no budget set, no catalog model)
        "skillIndexBudgetTokens": 2000,
    }
    assert config["permissions"]["source"] == "agents/shop/rules.yaml"
    assert config["permissions"]["defaultDecision"] == "ask"
    assert [(r["name"], r["tool"], r["decision"]) for r in config["permissions"]["rules"]] == [
        ("questions", "ask_user", "allow"),
        ("refunds-need-approval", "refund", "ask"),
    ]
    assert (config["skills"], config["subagents"]) == ([], [])
    greeter = body(http.get("/agents/greeter/config"), 200)
    assert greeter["subagents"] == ["helper"]
    assert greeter["tools"][0]["subagent"] is True
    assert greeter["permissions"] == {"source": None, "defaultDecision": "allow", "rules": []}
    assert body(http.get("/agents/nobody/config"), 404) == {"error": "unknown agent 'nobody'"}
    assert body(http.get("/no/such/route"), 404) == {"error": "not found"}
    assert body(http.delete("/agents"), 405) == {"error": "method not allowed"}


def test_a_message_is_answered_and_the_session_continues(http: httpx.Client):
    first = body(http.post("/agents/shop/messages", json={"message": "hello"}), 200)
    assert (first["text"], first["stopReason"]) == ("heard: hello", "completed")
    assert types(first["events"]) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    check_full(first["events"])
    sid = first["sessionId"]
    again = {"message": "and more", "sessionId": sid}
    second = body(http.post("/agents/shop/messages", json=again, params={"profile": "v1"}), 200)
    assert second == {
        "text": "heard: hello | and more",
        "sessionId": sid,
        "events": [
            {"type": "session", "sessionId": sid},
            second["events"][1],
            {"type": "loop:done", "text": "heard: hello | and more"},
            {"type": "done", "text": "heard: hello | and more"},
        ],
    }  # (v1 has no stopReason for a run that ended on its own)
    assert second["events"][1]["type"] == "budget:check"
    check_v1(second["events"])
    shown = body(http.get(f"/agents/shop/sessions/{sid}"), 200)
    assert (shown["sessionId"], shown["status"], shown["lastSeq"], shown["pending"]) == (
        sid,
        "idle",
        16,
        [],
    )
    assert [(m["role"], m.get("content")) for m in shown["history"]] == [
        ("user", "hello"),
        ("assistant", None),
        ("user", "and more"),
        ("assistant", None),
    ]
    assert shown["history"][3]["parts"] == [{"type": "text", "text": "heard: hello | and more"}]
    listed = body(http.get("/agents/shop/sessions"), 200)["sessions"]
    mine = [s for s in listed if s["id"] == sid]
    assert [(s["agent"], s["status"], s["lastSeq"]) for s in mine] == [("shop", "idle", 16)]
    assert mine[0]["title"] == "hello"  # its first message (runtime.titles)
    assert set(mine[0]) == {
        "id",
        "title",
        "agent",
        "status",
        "lastSeq",
        "createdAt",
        "updatedAt",
        "forkedFrom",
    }
    assert body(http.get(f"/agents/greeter/sessions/{sid}"), 404) == {
        "error": f"no session '{sid}' for agent 'greeter'"
    }


def test_bad_requests_get_one_clear_error(http: httpx.Client):
    post = http.post
    assert body(post("/agents/nobody/messages", json={"message": "x"}), 404) == {
        "error": "unknown agent 'nobody'"
    }
    deep = [b'{"message": "x", "n": ' + b"[" * n + b"]" * n + b"}" for n in (700, 3000)]
    for bad in (b"{nope", b'{"message": "x", "n": 1' + b"0" * 5000 + b"}", *deep):  # (too big)
        assert body(post("/agents/shop/messages", content=bad), 400) == {
            "error": "the request body is not valid JSON"
        }
    assert body(post("/agents/shop/messages", json=[1]), 400) == {
        "error": "the request body must be a JSON object"
    }
    for message in ({}, {"message": ""}, {"message": "   "}, {"message": None}):
        assert body(post("/agents/shop/messages", json=message), 400) == {
            "error": "message is required"
        }
    assert body(post("/agents/shop/messages", json={"message": 3}), 400) == {
        "error": "message must be a string"
    }
    for bad in ("a\nb", "x" * 257, ""):
        sent = {"message": "x", "sessionId": bad}
        assert body(post("/agents/shop/messages", json=sent), 400) == {
            "error": "sessionId must be 1-256 characters, none of them a control character"
        }
    assert body(post("/agents/shop/messages?profile=v2", json={"message": "x"}), 400) == {
        "error": "profile must be 'full' or 'v1'"
    }
    big = {"message": "x" * (1 << 20)}
    assert body(post("/agents/shop/messages", json=big), 413) == {
        "error": "the request body is over 1048576 bytes"
    }

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"message": "'
        for _ in range(17):
            yield b"x" * 65536
        yield b'"}'

    assert body(post("/agents/shop/messages", content=chunked()), 413) == {
        "error": "the request body is over 1048576 bytes"
    }
    # validation errors of the stream route are plain JSON, before any SSE header
    assert body(post("/agents/shop/messages/stream", json={}), 400) == {
        "error": "message is required"
    }
    assert body(post("/agents/nobody/messages/stream", json={"message": "x"}), 404) == {
        "error": "unknown agent 'nobody'"
    }


def test_events_are_replayed_from_a_sequence_number(http: httpx.Client):
    done = body(http.post("/agents/shop/messages", json={"message": "log me"}), 200)
    sid = done["sessionId"]
    log = body(http.get(f"/agents/shop/sessions/{sid}/events"), 200)["events"]
    assert [e["seq"] for e in log] == list(range(1, 9))
    assert [e["event"] for e in log] == done["events"]
    assert all(isinstance(e["at"], str) for e in log)
    tail = body(http.get(f"/agents/shop/sessions/{sid}/events", params={"after": 6}), 200)
    assert [(e["seq"], e["event"]["type"]) for e in tail["events"]] == [
        (7, "loop:done"),
        (8, "done"),
    ]
    v1 = body(http.get(f"/agents/shop/sessions/{sid}/events?profile=v1"), 200)["events"]
    assert [(e["seq"], e["event"]["type"]) for e in v1] == [
        (1, "session"),
        (4, "budget:check"),
        (7, "loop:done"),
        (8, "done"),
    ]
    check_v1([e["event"] for e in v1])
    for bad in ("-1", "x", "1.5", "³", "١"):  # (a digit to `str.isdigit` is not one to `int`)
        assert body(http.get(f"/agents/shop/sessions/{sid}/events?after={bad}"), 400) == {
            "error": "after must be a non-negative integer (a sequence number)"
        }


def test_the_openapi_document_names_every_route(http: httpx.Client, server: LiveServer):
    document = body(http.get("/openapi.json"), 200)
    assert document["openapi"].startswith("3.1")
    from starlette.routing import Route

    app = server.server.config.app
    paths = {r.path.replace(":path}", "}") for r in app.routes if isinstance(r, Route)}
    served = paths - {"/", "/playground", "/docs"}
    assert set(document["paths"]) == served - {"/openapi.json"}


def test_the_playground_and_static_files(http: httpx.Client):
    from loopwright.server.app import STATIC

    root = http.get("/")
    assert (root.status_code, root.headers["location"]) == (307, "/playground")
    page = http.get("/playground")
    if (STATIC / "playground.html").is_file():
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    else:
        assert body(page, 404) == {"error": "not found"}
    assert body(http.get("/static/no-such-file.js"), 404) == {"error": "not found"}
    assert body(http.get("/static/../pyproject.toml"), 404) == {"error": "not found"}


def test_a_failed_run_is_answered_with_its_error(http: httpx.Client):
    for text in ("one", "two"):  # the greeter's script has two replies
        body(http.post("/agents/greeter/messages", json={"message": text, "sessionId": "e1"}), 200)
    failed = http.post(
        "/agents/greeter/messages",
        json={"message": "three", "sessionId": "e1"},
        params={"profile": "v1"},
    )
    error = "model request failed: script exhausted: all 2 replies were used"
    assert body(failed, 500) == {"error": f"Error: {error}"}  # v1: a failed run is a 500
    again = http.post("/agents/greeter/messages", json={"message": "four", "sessionId": "e1"})
    full = body(again, 200)  # the full profile: 200, the run's events and its error
    assert (full["text"], full["stopReason"], full["error"]) == (
        f"Error: {error}",
        "error",
        f"Error: {error}",
    )
    assert types(full["events"])[-2:] == ["loop:error", "done"]


def test_a_reload_is_served_through_the_runtime(tmp_path):
    """`loopwright dev` loads the project again: the next run is the new version's."""
    from loopwright.server.dev import reload

    with serving(tmp_path / "shop") as live, live.client() as http:
        first = body(http.post("/agents/greeter/messages", json={"message": "hi"}), 200)
        assert first["text"] == "Hello there!"
        (live.root / "agents" / "greeter" / "script.yaml").write_text("replies: [Howdy!]\n")
        said: list[str] = []
        state = live.app.state.loopwright
        assert reload(state, live.root, said.append)
        assert said == ["reloaded: 3 agent(s): desk, greeter, shop"]
        assert state.runtime.agents is state.project.agents
        again = body(http.post("/agents/greeter/messages", json={"message": "hi"}), 200)
        assert again["text"] == "Howdy!"
