"""mcp.json in a project: in an agent's folder (its servers) or at the project's root (every
agent's, one server shared by all); a broken file is a ConfigError naming it; a project agent
calls a real server's tool in a run, rules matching `mcp__<server>__*`."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import drive
from loopwright import ConfigError, Session
from loopwright.mcp import MCPServer
from loopwright.project import load_project

SCRIPT = """replies:
  - tool_calls: [{name: mcp__clock__get_current_time, args: {timezone: Asia/Tokyo}}]
  - text: "Done."
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def servers(command: str = sys.executable, **more: dict[str, object]) -> str:
    entries = {"clock": {"command": command, "args": ["-m", "mcp_server_time"]}, **more}
    return json.dumps({"mcpServers": entries})


def mcp_of(agent: object) -> dict[str, MCPServer]:
    return {t.name: t for t in agent.tools if isinstance(t, MCPServer)}  # type: ignore[attr-defined]


def test_root_servers_are_every_agents_and_shared(tmp_path: Path) -> None:
    project = load_project(
        write(
            tmp_path,
            {
                "loopwright.toml": '[defaults]\nmodel = "scripted:script.yaml"\n',
                "mcp.json": servers(docs={"url": "http://127.0.0.1:9/mcp"}),
                "agents/support/agent.yaml": "instructions: hi\n",
                "agents/billing/agent.yaml": "instructions: hi\n",
                "agents/billing/mcp.json": servers(command="/opt/clock"),  # its own clock
            },
        ),
        dotenv=False,
    )
    support, billing = mcp_of(project.agent("support")), mcp_of(project.agent("billing"))
    assert sorted(support) == sorted(billing) == ["clock", "docs"]
    assert support["docs"] is billing["docs"]  # one server for the process
    assert billing["clock"].config.command == "/opt/clock"
    assert support["clock"].config.command == sys.executable


def test_a_broken_mcp_json_names_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "loopwright.toml": '[defaults]\nmodel = "scripted:script.yaml"\n',
            "agents/support/agent.yaml": "instructions: hi\n",
            "agents/support/mcp.json": '{"mcpServers": {"x": {"command": 7}}}',
        },
    )
    with pytest.raises(ConfigError) as caught:
        load_project(tmp_path, dotenv=False)
    path = tmp_path.resolve() / "agents/support/mcp.json"
    assert str(caught.value) == f"{path}: mcpServers.x.command: expected a string, not int"


async def test_a_project_agent_calls_an_mcp_tool_under_its_rules(tmp_path: Path) -> None:
    project = load_project(
        write(
            tmp_path,
            {
                "loopwright.toml": '[defaults]\nmodel = "scripted:script.yaml"\n',
                "agents/support/agent.yaml": "instructions: hi\n",
                "agents/support/script.yaml": SCRIPT,
                "agents/support/mcp.json": servers(),
                "agents/support/rules.yaml": "rules:\n"
                "  - {name: clock, tool: 'mcp__clock__*', decision: allow}\n",
            },
        ),
        dotenv=False,
    )
    session = Session(project.agent("support"))
    try:
        result = await drive(session.run("time in Tokyo?"))
    finally:
        await session.toolsets.exit_all()  # the session's own: it has no runtime
    [decision] = [e for e in result.events if e.type == "actauth:decision"]
    assert (decision.tool, decision.decision) == ("mcp__clock__get_current_time", "allow")
    assert "clock" in decision.reason, decision.reason
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert not output.is_error and json.loads(output.content)["timezone"] == "Asia/Tokyo"
    assert result.text == "Done."
