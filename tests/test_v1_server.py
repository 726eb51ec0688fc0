"""v1 without the client's help, and session ids as clients choose them: `[server] profile`
sets the profile of every route that does not ask for one, the `/v1` prefix always means v1,
and a session id is any text of 1-256 characters but control characters, kept as given (a `/`
in it travels percent-encoded, as one path segment)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from conftest import V1
from live_server import LiveServer, make_project, serving
from loopwright.errors import ConfigError
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.server.settings import ServerSettings
from test_cli_project import lw


def body(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json()


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_the_server_wide_profile(tmp_path: Path) -> None:
    with serving(tmp_path / "shop", '[server]\nprofile = "v1"\n') as live, live.client() as http:
        v1 = body(http.post("/agents/shop/messages", json={"message": "hi", "sessionId": "s"}), 200)
        assert v1 == {"text": "heard: hi", "sessionId": "s", "events": v1["events"]}
        assert types(v1["events"]) == ["session", "budget:check", "loop:done", "done"]
        for event in v1["events"]:
            V1.validate(event)
        history = body(http.get("/agents/shop/sessions/s"), 200)
        assert history == {"sessionId": "s", "history": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "heard: hi"}]},
        ]}  # fmt: skip
        sent = {"message": "again", "sessionId": "s"}
        full = body(http.post("/agents/shop/messages?profile=full", json=sent), 200)
        assert full["stopReason"] == "completed" and "input:received" in types(full["events"])
        prefixed = http.post("/v1/agents/shop/messages?profile=full", json=sent)
        assert "stopReason" not in body(prefixed, 200)  # the prefix always means v1


def test_the_v1_prefix_serves_every_route(tmp_path: Path) -> None:
    with serving(tmp_path / "shop") as live, live.client() as http:
        assert body(http.get("/v1/health"), 200)["ok"] is True
        assert body(http.get("/v1/agents/shop/config"), 200)["contextBudgetTokens"] == 100_000
        assert body(http.get("/v1/no/such/route"), 404) == {"error": "not found"}
        assert body(http.get("/v1/agents/shop/sessions/nobody"), 200) == {
            "sessionId": "nobody",
            "history": [],
        }
        assert body(http.get("/agents/shop/sessions/nobody"), 404) == {  # the full profile
            "error": "no session 'nobody' for agent 'shop'"
        }


def test_a_bad_server_profile_is_a_config_error() -> None:
    assert ServerSettings.from_project({"server": {"profile": "v1"}}).profile == "v1"
    assert ServerSettings.from_project({}).profile == "full"
    with pytest.raises(ConfigError, match=r'\[server\] profile must be "full" or "v1"'):
        ServerSettings.from_project({"server": {"profile": "v2"}})


IDS = [
    "ana.lopez+orders@example.com",
    "a/b",
    "a",
    "a/b/c",
    "café ☕ 100%",
    "%2F",
    "x" * 256,
    " spaced ",
]


def test_session_ids_are_kept_as_given(tmp_path: Path) -> None:
    with serving(tmp_path / "shop") as live, live.client() as http:
        for sid in IDS:
            sent = {"message": f"to {sid}", "sessionId": sid}
            assert body(http.post("/agents/shop/messages", json=sent), 200)["sessionId"] == sid
        for sid in IDS:  # each its own session, read back by its percent-encoded id
            path = f"/agents/shop/sessions/{quote(sid, safe='')}"
            shown = body(http.get(path), 200)
            assert (shown["sessionId"], shown["history"][0]["content"]) == (sid, f"to {sid}")
            events = body(http.get(f"{path}/events"), 200)["events"]
            assert events[0]["event"] == {"type": "session", "sessionId": sid}
        listed = body(http.get("/agents/shop/sessions?limit=100"), 200)["sessions"]
        assert sorted(s["id"] for s in listed) == sorted(IDS)
        for bad in ("a\nb", "tab\there", "\x7f", "\x85", "", "x" * 257):
            sent = {"message": "x", "sessionId": bad}
            assert body(http.post("/agents/shop/messages", json=sent), 400) == {
                "error": "sessionId must be 1-256 characters, none of them a control character"
            }


def test_the_cli_takes_any_session_id_and_the_server_reads_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "shop")
    sid = "ana.lopez@example.com/orders 7"
    for new, message in ((["--new"], "one"), ([], "two")):
        ran = lw(root, "run", "shop", *new, "--session", sid, message)
        assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "heard: one | two"
    with LiveServer(create_app(load_project(root))) as live, live.client() as http:
        shown = body(http.get(f"/v1/agents/shop/sessions/{quote(sid, safe='')}"), 200)
        assert shown["sessionId"] == sid
        assert [m["content"] for m in shown["history"] if m["role"] == "user"] == ["one", "two"]


def test_the_cli_refuses_a_session_id_the_server_would(tmp_path: Path) -> None:
    root = make_project(tmp_path / "shop")
    for bad in ("a\nb", "tab\there", "x" * 257):
        ran = lw(root, "run", "shop", "--session", bad, "hello")
        assert ran.returncode == 2, ran.stderr
        assert "--session must be 1-256 characters, none of them a control character" in ran.stderr
        assert ran.stdout == ""
