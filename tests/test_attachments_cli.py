"""`loopwright run AGENT --image PATH --file PATH "text"`: the attachments go with the message,
as references in the events and as bytes in the folder's log; a bad one is a usage error."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
if not Path(LOOPWRIGHT).exists():
    LOOPWRIGHT = shutil.which("loopwright") or LOOPWRIGHT

AGENT_PY = """\
from loopwright import Agent
from loopwright.testing import ScriptedModel

agent = Agent(name="eyes", model=ScriptedModel.from_script(["A dot and a report."]))
"""


def loopwright(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home = {"LOOPWRIGHT_HOME": str(cwd / "home"), "NO_COLOR": "1"}
    return subprocess.run(
        [LOOPWRIGHT, *args],
        cwd=cwd,
        env={**os.environ, **home},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # a safety net
    )


def test_run_with_an_image_and_a_file(tmp_path: Path):
    folder = tmp_path / "eyes"
    folder.mkdir()
    (folder / "agent.py").write_text(AGENT_PY)
    (tmp_path / "dot.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    out = loopwright(
        tmp_path,
        *("run", "eyes", "--json", "--new", "--session", "s1"),
        *("--image", "dot.png", "--file", "report.pdf", "look"),
    )
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    [received] = [e for e in events if e["type"] == "input:received"]
    png, pdf = hashlib.sha256(PNG).hexdigest(), hashlib.sha256(PDF).hexdigest()
    assert received["message"] == {
        "role": "user",
        "content": "look",
        "attachments": [
            {
                "type": "image",
                "mediaType": "image/png",
                "sha256": png,
                "size": 70,
                "name": "dot.png",
            },
            {
                "type": "document",
                "mediaType": "application/pdf",
                "sha256": pdf,
                "size": len(PDF),
                "name": "report.pdf",
            },
        ],
    }
    assert events[-1] == {"type": "done", "text": "A dot and a report.", "stopReason": "completed"}
    [db] = list(tmp_path.rglob("*.db"))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT sha256, media_type, size FROM attachments ORDER BY size")
        assert rows.fetchall() == [(pdf, "application/pdf", len(PDF)), (png, "image/png", 70)]
    shown = loopwright(tmp_path, "sessions", "show", "s1", "--project", "eyes")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1] == (
        f"user: look [image: dot.png, image/png, 70 B] [document: report.pdf, application/pdf, "
        f"{len(PDF)} B]"
    )


def test_a_file_that_cannot_be_attached_is_a_usage_error(tmp_path: Path):
    folder = tmp_path / "eyes"
    folder.mkdir()
    (folder / "agent.py").write_text(AGENT_PY)
    (tmp_path / "notes.bin").write_bytes(b"\x00\x01\x02")
    out = loopwright(tmp_path, "run", "eyes", "--image", "missing.png", "look")
    assert (out.returncode, out.stdout) == (2, "")
    assert "cannot read attachment missing.png: No such file or directory" in out.stderr
    out = loopwright(tmp_path, "run", "eyes", "--file", "notes.bin", "look")
    assert (out.returncode, out.stdout) == (2, "")
    assert "attachment notes.bin: unsupported type" in out.stderr
