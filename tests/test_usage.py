"""Usage reported (issue 17, point 4): `GET /usage`, `loopwright usage`, and the usage line of
`sessions show` and of the session's HTTP body, all summing the stored usage rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer
from loopwright.project import load_project
from loopwright.server import create_app
from test_cli_project import lw

REPLY = {"text": "noted", "usage": {"input_tokens": 100, "output_tokens": 10, "cost": 0.002}}
FREE = {"text": "noted", "usage": {"input_tokens": 7, "output_tokens": 3}}


def project(root: Path) -> Path:
    """Two agents on scripted models: `clerk` (each reply priced) and `free` (no price)."""
    for name, reply in (("clerk", REPLY), ("free", FREE)):
        folder = root / "agents" / name
        folder.mkdir(parents=True)
        (folder / "agent.yaml").write_text("model: scripted:script.json\n")
        (folder / "script.json").write_text(json.dumps({"replies": [reply] * 4}))
    (root / "loopwright.toml").write_text("")
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = project(tmp_path_factory.mktemp("usage"))
    with LiveServer(create_app(load_project(root))) as live:
        live.root = root
        yield live


@pytest.fixture(scope="module")
def sessions(server: LiveServer) -> list[str]:
    """Three runs: two clerk sessions and one free one."""
    with server.client() as http:
        ids = []
        for agent in ("clerk", "clerk", "free"):
            answer = http.post(f"/agents/{agent}/messages", json={"message": "hi"})
            assert answer.status_code == 200, answer.text
            ids.append(answer.json()["sessionId"])
        return ids


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def totals(requests: int, i: int, o: int, cost: float | None, unpriced: int) -> dict[str, Any]:
    return {
        "requests": requests,
        "inputTokens": i,
        "outputTokens": o,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
        "cost": cost,
        "unpricedRequests": unpriced,
    }


def test_usage_sums_the_tenants_requests_by_group(
    http: httpx.Client, server: LiveServer, sessions: list[str]
):
    clerk_a, clerk_b, free = sessions
    assert ok(http.get("/usage")) == {
        "tenant": "default",
        "by": [],
        "groups": [totals(3, 207, 23, 0.004, 1)],
        "nextCursor": None,
    }
    by_agent = ok(http.get("/usage", params={"by": "agent"}))["groups"]
    assert by_agent == [
        {"agent": "clerk", **totals(2, 200, 20, 0.004, 0)},
        {"agent": "free", **totals(1, 7, 3, None, 1)},
    ]
    day = ok(http.get("/agents/clerk/sessions"))["sessions"][0]["updatedAt"][:10]
    model = f"scripted:{server.root / 'agents' / 'clerk' / 'script.json'}"
    by_day_model = ok(http.get("/usage", params={"by": "day,model", "agent": "clerk"}))
    assert by_day_model["groups"] == [{"day": day, "model": model, **totals(2, 200, 20, 0.004, 0)}]
    one = ok(http.get("/usage", params={"agent": "clerk", "session": clerk_b}))["groups"]
    assert one == [totals(1, 100, 10, 0.002, 0)]
    assert free not in {clerk_a, clerk_b}


def test_usage_pages_and_says_what_is_wrong(http: httpx.Client, sessions: list[str]):
    seen, cursor = [], None
    for _ in range(4):
        params = {"by": "agent,session", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = ok(http.get("/usage", params=params))
        seen += [(g["agent"], g["session"]) for g in page["groups"]]
        if (cursor := page["nextCursor"]) is None:
            break
    assert seen == sorted(("clerk" if i < 2 else "free", s) for i, s in enumerate(sessions))
    assert ok(http.get("/usage", params={"by": "tenant"}), 400) == {
        "error": "group by any of agent, session, day, model, each once (got ('tenant',))"
    }
    assert ok(http.get("/usage", params={"session": sessions[0]}), 400) == {
        "error": "a session is named with its agent"
    }
    assert ok(http.get("/usage", params={"from": "yesterday"}), 400) == {
        "error": "'yesterday' is not a day (YYYY-MM-DD)"
    }
    assert ok(http.get("/usage", params={"agent": "nobody"}), 404) == {
        "error": "unknown agent 'nobody'"
    }
    bad = ok(http.get("/usage", params={"by": "agent", "cursor": "eA"}), 400)
    assert "is not one this log gave" in bad["error"]


def test_a_sessions_body_carries_its_usage(http: httpx.Client, sessions: list[str]):
    shown = ok(http.get(f"/agents/clerk/sessions/{sessions[0]}"))
    assert shown["usage"] == totals(1, 100, 10, 0.002, 0)
    shown = ok(http.get(f"/agents/free/sessions/{sessions[2]}"))
    assert shown["usage"] == totals(1, 7, 3, None, 1)


def test_the_cli_reports_usage_and_sessions_show_its_line(server: LiveServer, sessions):
    out = lw(server.root, "usage", "--by", "agent")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "AGENT  REQUESTS  IN   OUT  CACHE READ  CACHE WRITE  COST",
        "clerk  2         200  20   0           0            $0.0040",
        "free   1         7    3    0           0            no price known",
    ]
    out = lw(server.root, "usage", "--json")
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        {
            "requests": 3,
            "input_tokens": 207,
            "output_tokens": 23,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "cost": 0.004,
            "unpriced": 1,
        }
    ]
    out = lw(server.root, "usage", "--by", "week")
    assert out.returncode == 2
    assert "group by any of agent, session, day, model" in out.stderr
    out = lw(server.root, "sessions", "show", sessions[0])
    assert out.returncode == 0, out.stderr
    assert (
        "usage: 1 model request · 100 in · 10 out · $0.0020 (with its subagents)"
        in out.stdout.splitlines()
    )
