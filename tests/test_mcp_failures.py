"""MCP servers that fail, over stdio: one that crashes, fails to start or does not answer gives
an error result naming it (and no secret) and starts again on the next use; one that failed to
start is listed again later; a call past its timeout is cancelled on the server; a new event
loop starts the server anew."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from conftest import call, drive, scripted
from loopwright import Agent, Session
from loopwright.mcp import MCPServer, StdioServer
from loopwright.tools import ToolReturn
from loopwright.toolsets import Toolsets
from mcp_servers import EVERYTHING, SECRET, context, everything_stdio, node, time_server, tools_of


async def test_a_crashed_server_is_started_again_on_next_use(
    tmp_path: Path, started: list[MCPServer]
) -> None:
    pidfile = tmp_path / "pid"
    config = StdioServer(
        name="clock",
        command="sh",
        args=("-c", 'echo $$ > "$0"; exec "$1" -m mcp_server_time', str(pidfile), sys.executable),
    )
    tools = await tools_of(server := MCPServer(config))
    started.append(server)
    now = tools["mcp__clock__get_current_time"]
    assert not (await now.call({"timezone": "UTC"}, context())).is_error
    os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the server we started dies
    crashed = await now.call({"timezone": "UTC"}, context())
    assert isinstance(crashed, ToolReturn) and crashed.is_error
    assert crashed.content.startswith(
        "MCP server 'clock' stopped answering (MCPError: Connection closed"
    )
    assert crashed.content.endswith("it will be started again on the next call")
    again = await now.call({"timezone": "UTC"}, context())
    assert isinstance(again, ToolReturn) and not again.is_error
    assert json.loads(again.content)["timezone"] == "UTC"
    assert server.starts == 2


async def test_a_server_that_fails_to_start_names_itself_and_no_secret(
    started: list[MCPServer],
) -> None:
    config = StdioServer(
        name="broken",
        command="sh",
        args=("-c", 'echo "cannot log in with $API_KEY" >&2; exit 3'),
        env={"API_KEY": SECRET},
    )
    server = MCPServer(config)
    started.append(server)
    await server.enter()  # logged, not raised
    assert tuple(await server.list_tools()) == ()
    result = await server.call("anything", {}, None)
    assert result.is_error
    assert result.content.startswith("MCP server 'broken' failed to start: ")
    assert result.content.endswith("; its last output: cannot log in with ***")
    assert SECRET not in result.content
    assert server.starts == 2  # tried again on use

    missing = MCPServer(StdioServer(name="ghost", command="/nonexistent/mcp-server"))
    started.append(missing)
    assert (await missing.call("x", {}, None)).content.startswith(
        "MCP server 'ghost' failed to start: FileNotFoundError"
    )


async def test_a_server_that_does_not_answer_times_out(started: list[MCPServer]) -> None:
    server = MCPServer(
        StdioServer(name="mute", command="sh", args=("-c", "exec sleep 600")), start_timeout=0.5
    )
    started.append(server)
    result = await server.call("x", {}, None)
    assert result == ToolReturn(
        content="MCP server 'mute' failed to start: TimeoutError: no answer within 0.5s",
        is_error=True,
    )


async def test_a_server_that_failed_to_start_is_listed_again_later(
    tmp_path: Path, started: list[MCPServer]
) -> None:
    """A run lists a live toolset only when its version changed: a server that failed to start
    changes it once `retry_after` has passed, so the next run's listing starts it again."""
    ready = tmp_path / "ready"
    config = StdioServer(
        name="late",
        command="sh",
        args=(
            "-c",
            'test -f "$0" || exit 3; exec "$1" -m mcp_server_time',
            str(ready),
            sys.executable,
        ),
    )
    server = MCPServer(config, retry_after=0)
    started.append(server)
    agent = Agent(model=scripted("unused"), tools=[server])
    entered = Toolsets()  # (the server is exited by `started`)
    await agent.refresh_tools(entered)
    assert [t.name for t in agent.current_tools] == []
    ready.touch()
    await agent.refresh_tools(entered)
    assert [t.name for t in agent.current_tools] == [
        "mcp__late__get_current_time",
        "mcp__late__convert_time",
    ]
    assert server.starts == 3  # entered, listed at once (retry_after=0: no wait), listed later


def test_a_new_event_loop_starts_the_server_anew() -> None:
    """A toolset outlives an `asyncio.run`: the next loop starts its own server process (the
    old loop's task was cancelled when that loop ended, which stopped the old one)."""
    server = MCPServer(time_server())

    async def use() -> bool:
        tools = await server.list_tools()
        return (await tools[0].call({"timezone": "UTC"}, None)).is_error

    assert asyncio.run(use()) is False
    assert asyncio.run(use()) is False

    async def stop() -> None:
        await server.exit()

    asyncio.run(stop())
    assert server.starts == 2


async def test_a_call_past_its_timeout_is_cancelled_on_the_server(
    tmp_path: Path, started: list[MCPServer]
) -> None:
    """mcp.json's `timeout` is the tool's: the run cuts the call off there, and the server is
    told (`notifications/cancelled`)."""
    wire = tmp_path / "to-server.jsonl"
    config = StdioServer(
        name="everything",
        command="sh",
        args=("-c", 'tee "$0" | exec "$1" "$2" stdio', str(wire), node(), str(EVERYTHING)),
        timeout=0.5,
    )
    server = MCPServer(config)
    started.append(server)
    name = "mcp__everything__trigger-long-running-operation"
    model = scripted({"tool_calls": [call(name, duration=60, steps=60)]}, "gave up")
    result = await drive(Session(Agent(model=model, tools=[server])).run("go"))
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert output.is_error and "timed out" in output.content, output.content
    tools = {t.name: t for t in await server.list_tools()}
    assert await tools["mcp__everything__echo"].call({"message": "x"}, None) == ToolReturn(
        content="Echo: x"
    )
    sent = [json.loads(line) for line in wire.read_text().splitlines()]
    [request] = [m for m in sent if m.get("method") == "tools/call"][:1]
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [request["id"]]


async def test_a_servers_own_secrets_are_removed_from_its_results(
    started: list[MCPServer],
) -> None:
    """docs/mcp.md: `env`'s values are secrets, so no result of that server carries them (its
    environment printed, or a value echoed back)."""
    config = everything_stdio()
    server = MCPServer(
        StdioServer(
            name="everything", command=config.command, args=config.args, env={"API_KEY": SECRET}
        )
    )
    started.append(server)
    tools = await tools_of(server)
    printed = await tools["mcp__everything__get-env"].call({}, context())
    assert json.loads(printed.content)["API_KEY"] == "***"
    assert SECRET not in printed.content
    echoed = await tools["mcp__everything__echo"].call({"message": f"key={SECRET}"}, context())
    assert echoed == ToolReturn(content="Echo: key=***")
