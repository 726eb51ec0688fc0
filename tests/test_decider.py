"""Who decided, as every door records it: the principal the door authenticated — a bearer
token's name (`token:<name>`), an approval link (`link`), the terminal's user (the command
line) — never a name the caller gives. A caller's `by` is kept beside it as a labelled note,
and what anyone holding the item's link (or the log) sees is the recorded principal."""

from __future__ import annotations

import getpass
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, serving
from loopwright.notify.signing import mint
from test_cli import LOOPWRIGHT

ACME = "acme-token-0123456789"
OPS = "acme-ops-token-0123456789"
LINK_SECRET = "links-key-0123456789abcdef"
TOML = f"""
[auth.tokens]
"{ACME}" = "acme"

[[auth.token]]
env = "TEST_OPS_TOKEN"
tenant = "acme"
name = "acme-ops"

[notify]
base_url = "http://links.invalid"
link_secret_env = "TEST_LINK_SECRET"
"""
CLAIMED = "(name given by the caller, not verified: {})"


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TEST_OPS_TOKEN", OPS)
    monkeypatch.setenv("TEST_LINK_SECRET", LINK_SECRET)
    with serving(tmp_path / "shop", TOML) as server:
        yield server


def client(live: LiveServer, token: str) -> httpx.Client:
    return live.client(headers={"Authorization": f"Bearer {token}"})


def pause(http: httpx.Client, session: str, message: str = "refund A-1") -> str:
    paused = http.post("/agents/shop/messages", json={"message": message, "sessionId": session})
    assert paused.status_code == 202, paused.text
    return str(paused.json()["id"])


def decided(http: httpx.Client, session: str) -> list[dict[str, Any]]:
    """The session's `pending:decided` events (the log's record), as the API shows them."""
    events = http.get(f"/agents/shop/sessions/{session}/events").json()["events"]
    return [
        {k: e["event"].get(k) for k in ("status", "by", "reason")}
        for e in events
        if e["event"]["type"] == "pending:decided"
    ]


def link_page(live: LiveServer, item: str) -> str:
    token = mint("acme", item, time.time() + 60, LINK_SECRET)
    return httpx.get(f"{live.url}/links/{token}", timeout=60).text


def test_the_http_doors_record_the_token_not_the_name_the_caller_gives(live: LiveServer) -> None:
    with client(live, ACME) as acme, client(live, OPS) as ops:
        item = pause(acme, "s1")
        said = acme.post(f"/approvals/{item}/approve", json={"by": "alice@acme.example"})
        assert said.json()["stopReason"] == "completed"
        note = CLAIMED.format("alice@acme.example")
        assert decided(acme, "s1") == [{"status": "approved", "by": "token:acme", "reason": note}]
        again = ops.post(f"/approvals/{item}/approve", json={"by": "link"}).json()
        assert (again["alreadyResolved"], again["decidedBy"]) == (True, "token:acme")
        # what anyone holding the item's link sees
        assert "Already approved by token:acme: this link is used up." in link_page(live, item)

        item = pause(ops, "s2")  # v1's route, named like a link; a reason stays first
        denied = ops.post(f"/v1/approvals/{item}/deny", json={"by": "link", "reason": "no"})
        assert denied.status_code == 200
        expected = {"status": "denied", "by": "token:acme-ops", "reason": f"no {CLAIMED}"}
        assert decided(ops, "s2") == [{**expected, "reason": expected["reason"].format("link")}]

        item = pause(acme, "s3")  # v1's durable route; no `by`, no note
        resolved = acme.post(f"/pending-approvals/{item}/resolve", json={"decision": "approve"})
        assert resolved.json()["text"] == "Done: refunded 5 on A-1"
        assert decided(acme, "s3") == [{"status": "approved", "by": "token:acme", "reason": None}]

        item = pause(ops, "s4", "ask me")  # a question through the durable route
        answered = ops.post(
            f"/pending-questions/{item}/answer", json={"answer": "red", "by": "token:acme-ops"}
        )
        assert answered.status_code == 200
        assert decided(ops, "s4") == [  # a name that is the decider's own is no note
            {"status": "answered", "by": "token:acme-ops", "reason": None}
        ]


def test_the_command_line_records_the_terminal_user_and_by_as_a_note(live: LiveServer) -> None:
    with client(live, ACME) as acme:
        item = pause(acme, "c1")
        done = subprocess.run(
            [
                *(LOOPWRIGHT, "approvals", "approve", item, "--by", "root@prod", "--no-resume"),
                *("--project", str(live.root), "--tenant", "acme"),
            ],
            capture_output=True,
            text=True,
            timeout=120,  # a safety net
            check=False,
        )
        assert done.returncode == 0, done.stderr
        user = getpass.getuser()
        assert f"{item}: approved (approval: refund) by {user}" in done.stderr
        note = CLAIMED.format("root@prod")
        assert decided(acme, "c1") == [{"status": "approved", "by": user, "reason": note}]
