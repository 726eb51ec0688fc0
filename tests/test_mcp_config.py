"""mcp.json: servers parsed, `${VAR}` expanded from the environment, and every invalid file a
`ConfigError` that names the file and the key and never shows a secret."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from loopwright.errors import ConfigError
from loopwright.mcp import HttpServer, StdioServer, load_config, tool_name
from loopwright.mcp.config import parse_config, redact

SECRET = "sk-live-4f9a8b7c6d5e"
ENV = {"TOKEN": SECRET, "HOME_DIR": "/srv/app", "TZ_NAME": "UTC"}


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_servers_with_variables_expanded(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "time": {
                    "command": "python",
                    "args": ["-m", "mcp_server_time", "--local-timezone=${TZ_NAME}"],
                    "env": {"API_KEY": "${TOKEN}", "MODE": "${MODE:-fast}"},
                    "cwd": "${HOME_DIR}/time",
                },
                "github": {
                    "url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                    "timeout": 20,
                },
            }
        },
    )
    assert load_config(path, ENV) == [
        StdioServer(
            name="time",
            command="python",
            args=("-m", "mcp_server_time", "--local-timezone=UTC"),
            env={"API_KEY": SECRET, "MODE": "fast"},
            cwd="/srv/app/time",
        ),
        HttpServer(
            name="github",
            url="https://mcp.example.com/mcp",
            headers={"Authorization": f"Bearer {SECRET}"},
            timeout=20.0,
        ),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            "{not json",
            "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ({"servers": {}}, 'expected {"mcpServers": {"<name>": {...}}}'),
        (
            {"mcpServers": {"a b": {"command": "x"}}},
            "mcpServers.a b: a server's name is 1-40 letters",
        ),
        ({"mcpServers": {"s": []}}, "mcpServers.s: expected an object"),
        ({"mcpServers": {"s": {}}}, "mcpServers.s: give either 'command' (stdio) or 'url' (HTTP)"),
        (
            {"mcpServers": {"s": {"command": "x", "url": "http://h"}}},
            "mcpServers.s: give either 'command' (stdio) or 'url' (HTTP)",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "headers": {}}}},
            "mcpServers.s: unknown key 'headers'",
        ),
        ({"mcpServers": {"s": {"command": ""}}}, "mcpServers.s.command: must not be empty"),
        (
            {"mcpServers": {"s": {"command": "x", "args": "-v"}}},
            "mcpServers.s.args: expected a list",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "args": [1]}}},
            "mcpServers.s.args[0]: expected a string, not int",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "env": ["A"]}}},
            "mcpServers.s.env: expected an object of strings",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "env": {"A": 1}}}},
            "mcpServers.s.env.A: expected a string",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "timeout": 0}}},
            "mcpServers.s.timeout: expected a positive number",
        ),
        (
            {"mcpServers": {"s": {"url": "ftp://h"}}},
            "mcpServers.s.url: expected an http:// or https:// URL",
        ),
        (
            {"mcpServers": {"s": {"url": "http://h", "type": "sse"}}},
            "mcpServers.s.type: expected 'stdio' or 'http'",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "env": {"A": "${MISSING}"}}}},
            "mcpServers.s.env.A: environment variable MISSING is not set",
        ),
    ],
)
def test_invalid_files_name_the_file_and_key(tmp_path: Path, data: Any, message: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as caught:
        load_config(path, ENV)
    assert str(caught.value).startswith(f"{path}: {message}")
    assert caught.value.source == str(path)


def test_no_secret_in_any_error(tmp_path: Path) -> None:
    """Secret values (env, headers, the URL) never appear, whatever is wrong around them."""
    cases = [
        {"mcpServers": {"s": {"url": f"ftp://{SECRET}@h", "headers": {"A": SECRET}}}},
        {"mcpServers": {"s": {"url": "https://h", "headers": {"A": SECRET, "B": 7}}}},
        {"mcpServers": {"s": {"url": "https://h", "headers": {"A": SECRET}, "extra": 1}}},
        {"mcpServers": {"s": {"command": "x", "env": {"A": SECRET, "B": ["${TOKEN}"]}}}},
        f'{{"mcpServers": {{"s": {{"env": {{"A": "{SECRET}"}}, }}}}',
    ]
    for data in cases:
        with pytest.raises(ConfigError) as caught:
            load_config(write(tmp_path, data), ENV)
        assert SECRET not in str(caught.value)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "mcp.json", ENV)
    assert str(caught.value) == f"{tmp_path / 'mcp.json'}: cannot read: No such file or directory"


def test_secrets_redacted_from_text() -> None:
    server = HttpServer(
        name="s", url="https://h/mcp?key=abcdef", headers={"Authorization": f"Bearer {SECRET}"}
    )
    text = f"GET https://h/mcp?key=abcdef failed with Bearer {SECRET}"
    assert redact(text, server.secrets()) == "GET https://h/mcp?*** failed with ***"


def test_tool_names() -> None:
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("fs", "read.file/v2") == "mcp__fs__read_file_v2"
    long = tool_name("server", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")
    assert tool_name("fs", "a.b", {"mcp__fs__a_b"}) != "mcp__fs__a_b"


def test_the_docs_example_parses() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "mcp.md").read_text()
    [example] = re.findall(r"```json\n(.*?)```", doc, re.S)
    env = {"GITHUB_TOKEN": SECRET}
    time, github = parse_config(json.loads(example), "docs/mcp.md", env)
    assert time == StdioServer(
        name="time",
        command="python",
        args=("-m", "mcp_server_time", "--local-timezone=UTC"),
        env={"LOG_LEVEL": "warning"},
        cwd=".",
    )
    assert github == HttpServer(
        name="github",
        url="https://api.githubcopilot.com/mcp/",
        headers={"Authorization": f"Bearer {SECRET}"},
        timeout=60.0,
    )


def _validate(schema: dict[str, Any]) -> Any:
    from mcp.types import Tool as Listed

    from loopwright.mcp import MCPServer
    from loopwright.mcp.naming import build_tools

    server = MCPServer(StdioServer(name="hostile", command="unused"))
    [built] = build_tools(server, [Listed(name="t", inputSchema=schema)])
    return built.validate


def test_a_schemas_remote_ref_is_never_fetched_and_an_unresolvable_one_is_a_bad_call() -> None:
    """A server's schema does not make loopwright fetch a URL (which could hang the loop or
    reach what the server cannot), and a `$ref` to nowhere is a bad call, not a run's error."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    came: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                came.append(conn)
                conn.close()

    threading.Thread(target=accept, daemon=True).start()
    remote = f"http://127.0.0.1:{listener.getsockname()[1]}/s.json"
    try:
        for ref in (remote, "#/$defs/nope"):
            validate = _validate({"type": "object", "properties": {"x": {"$ref": ref}}})
            with pytest.raises(ValueError, match=r"^\(schema\): the tool's input schema cannot be"):
                validate({"x": 1})
    finally:
        listener.close()
    assert came == []


def test_a_listing_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    """Every tool goes into every request: a server listing thousands, a schema of megabytes or
    a description of a book is cut down, and the operators are told (P10)."""
    from mcp.types import Tool as Listed

    from loopwright.mcp import MCPServer
    from loopwright.mcp.naming import MAX_DESCRIPTION, MAX_TOOLS, build_tools

    server = MCPServer(StdioServer(name="hostile", command="unused"))
    huge = {"type": "object", "description": "x" * 70_000}
    listed = [
        Listed(name="wordy", description="w" * 10_000, inputSchema={"type": "object"}),
        Listed(name="huge", inputSchema=huge),
        *(Listed(name=f"t{i}", inputSchema={"type": "object"}) for i in range(MAX_TOOLS + 10)),
    ]
    tools = build_tools(server, listed)
    assert [t.name for t in tools[:2]] == ["mcp__hostile__wordy", "mcp__hostile__t0"]
    assert len(tools) == MAX_TOOLS and tools[-1].name == f"mcp__hostile__t{MAX_TOOLS - 2}"
    assert tools[0].description == "w" * MAX_DESCRIPTION
    assert [r.getMessage() for r in caplog.records] == [
        "MCP server 'hostile': tool 'huge' left out (its input schema is over 64000 characters)",
        f"MCP server 'hostile' lists over {MAX_TOOLS} tools: the rest are left out",
    ]


def test_a_schemas_pattern_is_matched_within_a_time_limit() -> None:
    """A server's pattern that backtracks for ever does not hold the event loop: past the
    limit the value is refused (the model reads why), and patterns still work."""
    validate = _validate(
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}}}
    )
    assert validate({"s": "aaaa"}) == {"s": "aaaa"}
    with pytest.raises(ValueError, match=r"^s: 'b' does not match '\^\(a\|aa\)\+\$'$"):
        validate({"s": "b"})
    with pytest.raises(ValueError, match=r"^s: could not be checked against '\^\(a\|aa\)\+\$' in"):
        validate({"s": "a" * 36 + "b"})  # (seconds of backtracking: the time limit ends it)
