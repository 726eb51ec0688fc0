"""What the `loopwright` command logs to stderr is redacted (P11): a tool's traceback that quotes
a key, on `loopwright run` (the same handler serves `loopwright serve`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from test_cli import LOOPWRIGHT

AGENT_PY = """\
from loopwright import Agent, redact, tool
from loopwright.testing import ScriptedModel

redact.register("deploy-token-registered-0001")


@tool
def deploy(target: str) -> str:
    \"\"\"Deploy.\"\"\"
    raise RuntimeError(
        "login failed with AWS key AKIAIOSFODNN7EXAMPLE / token deploy-token-registered-0001"
    )


script = [{"tool_calls": [{"name": "deploy", "id": "c1", "args": {"target": "prod"}}]}, "failed"]
agent = Agent(name="ops", model=ScriptedModel.from_script(script), tools=[deploy])
"""


def test_a_tools_traceback_is_logged_redacted(tmp_path: Path) -> None:
    folder = tmp_path / "ops"
    folder.mkdir()
    (folder / "agent.py").write_text(AGENT_PY)
    out = subprocess.run(
        [LOOPWRIGHT, "run", str(folder), "--json", "--yes", "go"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # (a safety net)
    )
    assert out.returncode == 0, out.stderr
    [output] = [e for e in map(json.loads, out.stdout.splitlines()) if e["type"] == "tool:output"]
    said = "login failed with AWS key [redacted] / token [redacted]"
    assert output["content"] == f"Tool 'deploy' failed: RuntimeError: {said}"
    assert "AKIAIOSFODNN7EXAMPLE" not in out.stderr and "registered-0001" not in out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == "loopwright: WARNING loopwright.tools: tool deploy (call c1) raised"
    assert lines[-1] == f"RuntimeError: {said}"
