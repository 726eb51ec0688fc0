"""The admin routes (issue 35 row 2, docs/admin.md) on a real server on loopback: an admin token
creates an agent and edits its files (the loader's errors with their lines; the change live at
once, written atomically, audited); any other token gets 403; no path leads out of an agent's
folder."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_server import LiveServer
from loopwright.cli.new import scaffold
from loopwright.project import load_project
from loopwright.server import ServerSettings, create_app

ADMIN = "admin-token-0123456789"
USER = "user-token-0123456789ab"
TOML = """\
[[auth.token]]
env = "LW_TEST_ADMIN"
tenant = "acme"
name = "ops-alice"
roles = ["admin"]

[[auth.token]]
env = "LW_TEST_USER"
tenant = "acme"
"""


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv("LW_TEST_ADMIN", ADMIN)
    monkeypatch.setenv("LW_TEST_USER", USER)
    (tmp_path / "loopwright.toml").write_text(TOML)
    scaffold(tmp_path, "example", "An example.", {})
    project = load_project(tmp_path)
    app = create_app(project, settings=ServerSettings.from_project(project.settings))
    with LiveServer(app) as server:
        server.root = tmp_path
        yield server


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_admin_creates_an_agent_and_edits_its_rules_live(
    served: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "loopwright.admin")
    root = served.root
    with served.client(headers=bearer(ADMIN)) as http:
        assert http.get("/admin/agents").json() == {
            "agents": [{"name": "example", "files": ["agent.yaml", "rules.yaml"]}],
            "builtins": ["ask_user", "files", "files-readonly", "shell", "read_result"],
        }
        made = http.post(
            "/admin/agents",
            json={"name": "desk", "prompt": "Be brief.", "tools": ["ask_user"]},
        )
        assert (made.status_code, made.json()) == (
            201,
            {"name": "desk", "files": ["agent.yaml", "prompt.md", "rules.yaml"], "reloaded": True},
        )
        assert http.post("/admin/agents", json={"name": "desk"}).status_code == 409
        unknown = http.post("/admin/agents", json={"name": "x", "tools": ["web"]})
        assert (unknown.status_code, unknown.json()["error"]) == (
            400,
            "unknown tools: web (the built-ins: ask_user, files, files-readonly, shell, read_result)",
        )
        assert [a["name"] for a in http.get("/agents").json()["agents"]] == ["desk", "example"]
        assert http.get("/admin/agents/desk/files/prompt.md").json() == {
            "file": "prompt.md",
            "text": "Be brief.\n",
        }

        rules = root / "agents" / "desk" / "rules.yaml"
        before = rules.read_text()
        typo = "default_decision: deny\nrules:\n  - name: echo-ok\n    tool: echo\n    decison: allow\n"
        refused = http.put("/admin/agents/desk/files/rules.yaml", json={"text": typo})
        assert (refused.status_code, refused.json()) == (
            422,
            {
                "error": "rules.yaml:5: unknown key 'decison' in a rule",
                "file": "rules.yaml",
                "line": 5,
            },
        )
        assert rules.read_text() == before  # nothing written
        fixed = typo.replace("decison", "decision")
        done = http.put("/admin/agents/desk/files/rules.yaml", json={"text": fixed})
        assert done.json() == {"file": "rules.yaml", "reloaded": True}
        assert rules.read_text() == fixed
        config = http.get("/agents/desk/config").json()
        assert config["permissions"]["defaultDecision"] == "deny"
        assert [r["name"] for r in config["permissions"]["rules"]] == ["echo-ok"]

        bad_yaml = http.put(
            "/admin/agents/desk/files/agent.yaml",
            json={"text": "model: scripted:s.yaml\nmax_turns: many\n"},
        )
        assert bad_yaml.status_code == 422
        assert bad_yaml.json()["line"] == 2 and bad_yaml.json()["file"] == "agent.yaml"

        skill = "---\nname: tidy\ndescription: Tidy a desk.\n---\n\nPut things away.\n"
        put = http.put("/admin/agents/desk/files/skills/tidy/SKILL.md", json={"text": skill})
        assert put.status_code == 200
        assert http.get("/admin/agents").json()["agents"][0]["files"] == [
            "agent.yaml",
            "prompt.md",
            "rules.yaml",
            "skills/tidy/SKILL.md",
        ]
        for path in (
            "../example/agent.yaml",
            "tools.py",
            "skills/../../x/SKILL.md",
            "x/rules.yaml",
        ):
            assert http.get(f"/admin/agents/desk/files/{path}").status_code in (400, 404), path
            assert http.put(f"/admin/agents/desk/files/{path}", json={"text": ""}).status_code in (
                400,
                404,
            ), path
        assert http.get("/admin/agents/ghost/files/agent.yaml").status_code == 404

    lines = (root / ".loopwright" / "admin.log").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [(e["who"], e["action"], e["agent"], e["file"]) for e in entries] == [
        ("token:ops-alice", "create", "desk", "agent.yaml"),
        ("token:ops-alice", "write", "desk", "rules.yaml"),
        ("token:ops-alice", "write", "desk", "skills/tidy/SKILL.md"),
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "loopwright.admin"][:3:2] == [
        "admin token:ops-alice: create desk/agent.yaml",
        "admin token:ops-alice: write desk/rules.yaml",
    ]
    assert not [p for p in (root / "agents" / "desk").iterdir() if p.name.startswith(".")]


def test_other_tokens_get_403_from_every_admin_route(served: LiveServer) -> None:
    with served.client(headers=bearer(USER)) as http:
        for method, path in (
            ("GET", "/admin/agents"),
            ("POST", "/admin/agents"),
            ("GET", "/admin/agents/example/files/agent.yaml"),
            ("PUT", "/admin/agents/example/files/agent.yaml"),
        ):
            answer = http.request(method, path, json={"name": "x", "text": "oops"})
            assert (answer.status_code, answer.json()) == (
                403,
                {"error": "the admin role is required"},
            ), path
    with served.client() as http:
        assert http.get("/admin/agents").status_code == 401
    assert not (served.root / "agents" / "x").exists()
    assert not (served.root / ".loopwright" / "admin.log").exists()
