"""Keys per request from the command line: a project whose `loopwright.toml` gives a provider an
`api_key_command`, run by `loopwright run` in a subprocess against aimock (which takes only
FRESH): a refused key is asked again and the run completes; a failing command is exit 1 with an
error naming it; the key is in no output and not in the project's stored log."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from aimock import aimock
from test_cli import LOOPWRIGHT
from test_provider_keys import ASK, FRESH, STALE, fixture, printer, ran


def project(tmp: Path, url: str, command: str) -> Path:
    """A project whose example agent runs `keyed:gpt-4o-mini`, keyed by `command`."""
    lw(tmp, "init", "proj")
    root = tmp / "proj"
    yaml = root / "agents" / "example" / "agent.yaml"
    yaml.write_text(yaml.read_text().replace("scripted:script.yaml", "keyed:gpt-4o-mini"))
    (root / "loopwright.toml").write_text(
        f'[providers.keyed]\nbase_url = "{url}/v1"\napi_key_command = {json.dumps(command)}\n'
    )
    return root


def lw(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
    return subprocess.run(
        [LOOPWRIGHT, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def stored(root: Path) -> str:
    [db] = (root / ".loopwright").glob("*.db")
    return "\n".join(r[0] for r in sqlite3.connect(db).execute("SELECT data FROM events"))


def test_run_asks_the_command_again_after_a_401(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIMOCK_API_KEYS", FRESH)
    with aimock(tmp_path, [fixture(f"Your key is {FRESH}.")]) as url:
        root = project(tmp_path, url, printer(tmp_path, STALE, FRESH))
        out = lw(root, "run", "example", "--json", ASK)
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout.splitlines()[-1])
    assert (done["type"], done["stopReason"]) == ("done", "completed")
    assert done["text"] == "Your key is [redacted]."
    assert ran(tmp_path) == 2  # the refused key, then the one taken
    for shown in (out.stdout, out.stderr, stored(root)):
        assert FRESH not in shown and STALE not in shown


def test_a_failing_key_command_is_exit_1_naming_it(tmp_path: Path):
    with aimock(tmp_path, [fixture()]) as url:
        root = project(tmp_path, url, printer(tmp_path, fail="not logged in"))
        out = lw(root, "run", "example", ASK)
    assert out.returncode == 1, out.stderr
    said = f"no API key: key command {sys.executable!r} exited with code 3: not logged in"
    assert said in out.stdout + out.stderr and ran(tmp_path) == 1
    assert FRESH not in out.stdout + out.stderr + stored(root)  # (what it printed before failing)
