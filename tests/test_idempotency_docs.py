"""docs/idempotency.md's worked example runs as written, offline, in a copy of `examples/`: the
payments agent's API loses its first answer, the tool retries with the same key, and the ledger
holds one charge under the key `tool:started` logged. Also through Python: the example agent
in a session of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from conftest import drive
from loopwright import Session
from loopwright import events as ev
from loopwright.project import load_project
from test_readme import ENV, after, block

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "idempotency.md"


def copy_examples(where: Path) -> Path:
    shutil.copytree(
        ROOT / "examples", where / "examples", ignore=shutil.ignore_patterns(".loopwright")
    )
    return where


def test_the_worked_example_charges_once(tmp_path: Path) -> None:
    commands = block(DOC, "sh", "loopwright run payments")
    env = ENV | {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), ENV.get("PYTHONPATH")]))
    }
    out = subprocess.run(
        ["bash", "-e", "-c", commands.code],
        cwd=copy_examples(tmp_path),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Invoice INV-7 is paid: 120.00 EUR, charged once."
    assert '"attempts":2' in out.stderr
    ledger = json.loads("\n".join(lines[1:-1]))
    assert ledger == json.loads(after(DOC, commands).code)  # what the page shows
    started = json.loads(lines[-1])["event"]
    assert started["type"] == "tool:started"
    assert list(ledger) == [started["idempotencyKey"]]


async def test_the_example_agent_in_python_charges_once_per_call(tmp_path: Path) -> None:
    project = load_project(copy_examples(tmp_path) / "examples")
    session = Session(project.agent("payments"))
    result = await drive(session.run("Please pay invoice INV-7: 120 EUR."))
    [started] = [e for e in result.events if isinstance(e, ev.ToolStarted)]
    [output] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert json.loads(output.content)["attempts"] == 2
    ledger = json.loads(
        (tmp_path / "examples" / ".loopwright" / "payments-ledger.json").read_text()
    )
    assert list(ledger) == [started.idempotency_key]
    assert ledger[started.idempotency_key]["id"] == "ch_1"
