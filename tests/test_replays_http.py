"""`POST /agents/{name}/sessions/{id}/replay` on a real server (uvicorn on loopback) over a
real store, SQLite and PostgreSQL: a session whose refund a human approved and whose question a
human answered replays unchanged; after its rules file changes, the report names the changed
decision; an unknown session is a 404, an unknown model a 400."""

from __future__ import annotations

from pathlib import Path

import pytest

from live_server import SHOP_RULES, LiveServer, make_project
from loopwright.project import load_project
from loopwright.server import create_app
from test_server import body


@pytest.fixture(params=["sqlite", "postgres"])
def toml(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return ""
    return f'[store]\nurl = "{request.getfixturevalue("pg_url")}"\n'


def test_a_session_is_replayed_over_http(tmp_path: Path, toml: str) -> None:
    root = make_project(tmp_path / "shop", toml)
    with LiveServer(create_app(load_project(root))) as server, server.client() as http:
        paused = body(http.post("/agents/shop/messages", json={"message": "refund A-1"}), 202)
        sid = paused["sessionId"]
        done = body(http.post(f"/approvals/{paused['id']}/approve", json={"by": "ana"}), 200)
        assert done["text"] == "Done: refunded 5 on A-1"
        again = {"message": "ask me", "sessionId": sid}
        asked = body(http.post("/agents/shop/messages", json=again), 202)
        answered = body(http.post(f"/questions/{asked['id']}/answer", json={"answer": "blue"}), 200)
        assert answered["text"] == "Done: blue"
        url = f"/agents/shop/sessions/{sid}/replay"

        assert body(http.post(url), 200) == {
            "ok": True,
            "session": sid,
            "agent": "shop",
            "model": "recorded",
            "turns": 2,
            "calls": 2,
            "changes": [],
            "text": f"replay of session {sid} (agent shop, model recorded): no changes in 2 "
            "turn(s), 2 call(s)",
        }
        rules = root / "agents" / "shop" / "rules.yaml"
        rules.write_text(SHOP_RULES.replace("refund, decision: ask", "refund, decision: allow"))
        changed = body(http.post(url, json={}), 200)
        assert (changed["ok"], changed["changes"]) == (
            False,
            [
                {
                    "turn": 1,
                    "call": 1,
                    "tool": "refund",
                    "kind": "decision",
                    "recorded": "ask",
                    "replayed": "allow",
                },
                {
                    "turn": 1,
                    "call": 1,
                    "tool": "refund",
                    "kind": "approval",
                    "recorded": "approved",
                    "replayed": None,
                },
            ],
        )
        assert body(http.post("/agents/shop/sessions/nope/replay"), 404) == {
            "error": "no session 'nope' for agent 'shop'"
        }
        unknown = body(http.post(url, json={"model": "nosuch:model"}), 400)
        assert unknown["error"].startswith("unknown model 'nosuch:model'")
