"""A rule naming a tool its agent does not have is a configuration error (issue 34 part 4): a
misspelt `deny` rule never matches, and the call it was meant to stop falls through to the
default decision. The error names the rule, its file and line, and the agent's tools (its own,
its plugins', its subagents', its MCP servers' once listed); a glob matching none of them is one
too, a pure wildcard never. From `load_project`, the command line and `serve` alike; with MCP
servers, at the first run, when their tools are known."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import drive
from loopwright import ConfigError, Session
from loopwright.project import load_project
from test_cli import LOOPWRIGHT
from test_mcp_project import SCRIPT, servers

ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
TOOLS = '''\
from loopwright import tool


@tool
def issue_refund(order: str, amount: int) -> str:
    """Refund an order."""
    return "ok"


@tool
def lookup_order(order: str) -> str:
    """Look an order up."""
    return "ok"
'''
RULES = """\
default_decision: allow
rules:
  - name: no-big-refunds
    tool: {tool}
    decision: deny
"""


def project(root: Path, tool: str, **more: str) -> Path:
    files = {
        "loopwright.toml": '[defaults]\nmodel = "scripted:script.yaml"\n',
        "agents/till/agent.yaml": "instructions: hi\n",
        "agents/till/script.yaml": 'replies:\n  - text: "Done."\n',
        "agents/till/tools.py": TOOLS,
        "agents/till/rules.yaml": RULES.format(tool=tool),
        **more,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def where(root: Path) -> str:
    return f"{root.resolve() / 'agents/till/rules.yaml'}:3"


@pytest.mark.parametrize(
    ("tool", "error"),
    [
        (
            "issue_refnd",
            "rule 'no-big-refunds' names the tool 'issue_refnd', which agent 'till' does not have "
            "(did you mean 'issue_refund'?); its tools: issue_refund, lookup_order",
        ),
        (
            "'db_*'",
            "rule 'no-big-refunds' names tools matching 'db_*', which agent 'till' does not "
            "have; its tools: issue_refund, lookup_order",
        ),
    ],
)
def test_a_rule_naming_a_missing_tool_fails_the_load(tmp_path: Path, tool: str, error: str):
    with pytest.raises(ConfigError) as raised:
        load_project(project(tmp_path, tool), dotenv=False)
    assert str(raised.value) == f"{where(tmp_path)}: {error}"


@pytest.mark.parametrize("tool", ["issue_refund", "'issue_*'", "'*'", "'**'", "'lookup_?rder'"])
def test_rules_naming_tools_the_agent_has_load(tmp_path: Path, tool: str):
    agent = load_project(project(tmp_path, tool), dotenv=False).agent("till")
    assert [t.name for t in agent.current_tools] == ["issue_refund", "lookup_order"]


def test_a_subagents_tools_count(tmp_path: Path):
    child = {
        "agents/till/subagents/helper/agent.yaml": "description: helps\ninstructions: hi\n",
        "agents/till/subagents/helper/tools.py": TOOLS.replace("issue_refund", "issue_credit"),
    }
    load_project(project(tmp_path, "issue_credit", **child), dotenv=False)


@pytest.mark.parametrize("command", [["agents", "--show", "till"], ["serve", "--port", "0"]])
def test_the_command_line_and_serve_print_it_and_exit_2(tmp_path: Path, command: list[str]):
    root = project(tmp_path, "issue_refnd")
    out = subprocess.run(
        [LOOPWRIGHT, *command, "--project", str(root)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0] == (
        f"loopwright: error: {where(tmp_path)}: rule 'no-big-refunds' names the tool "
        "'issue_refnd', which agent 'till' does not have (did you mean 'issue_refund'?); its "
        "tools: issue_refund, lookup_order"
    )


async def test_a_rule_naming_a_missing_mcp_tool_fails_the_first_run(tmp_path: Path):
    """MCP tools are known once their server is listed: the project loads, and the first run,
    which lists them, ends with the same error (`loop:error`), naming the server's tools too."""
    root = project(
        tmp_path,
        "mcp__clock__get_time",
        **{"agents/till/mcp.json": servers(), "agents/till/script.yaml": SCRIPT},
    )
    session = Session(load_project(root, dotenv=False).agent("till"))
    try:
        result = await drive(session.run("time in Tokyo?"))
    finally:
        await session.toolsets.exit_all()
    assert [e.type for e in result.events][-2:] == ["loop:error", "done"]
    assert result.events[-2].error == (
        f"ConfigError: {where(tmp_path)}: rule 'no-big-refunds' names the tool "
        "'mcp__clock__get_time', which agent 'till' does not have (did you mean "
        "'mcp__clock__convert_time'?); its tools: issue_refund, lookup_order, "
        "mcp__clock__convert_time, mcp__clock__get_current_time"
    )
    assert [e.type for e in result.events].count("tool:started") == 0
