"""MCP over streamable HTTP: the reference server (`@modelcontextprotocol/server-everything`)
on 127.0.0.1, started and stopped by the test. Listing, a call through a run, progress, an
image; a server that goes away gives an error result naming it (no secret from its headers or
URL) and is reached again once it is back."""

from __future__ import annotations

from conftest import call, drive, scripted
from loopwright import Agent, Session
from loopwright.mcp import HttpServer, MCPServer
from loopwright.tools import ToolReturn
from mcp_servers import SECRET, context, everything_http


async def test_http_server_in_a_run(started: list[MCPServer]) -> None:
    with everything_http(headers={"Authorization": f"Bearer {SECRET}"}) as config:
        server = MCPServer(config)
        started.append(server)
        model = scripted(
            {
                "tool_calls": [
                    call("mcp__everything__get-sum", a=2, b=3),
                    call("mcp__everything__trigger-long-running-operation", duration=0.2, steps=2),
                ]
            },
            "5",
        )
        result = await drive(Session(Agent(model=model, tools=[server])).run("2+3?"))
        names = [s.name for s in model.requests[0].tools]
        assert names[:3] == [
            "mcp__everything__echo",
            "mcp__everything__get-annotated-message",
            "mcp__everything__get-env",
        ]
        assert "mcp__everything__get-tiny-image" in names
        outputs = {
            e.tool: (e.content, e.is_error) for e in result.events if e.type == "tool:output"
        }
        assert outputs == {
            "mcp__everything__get-sum": ("The sum of 2 and 3 is 5.", False),
            "mcp__everything__trigger-long-running-operation": (
                "Long running operation completed. Duration: 0.2 seconds, Steps: 2.",
                False,
            ),
        }
        updates = [(e.message, e.progress) for e in result.events if e.type == "tool:update"]
        assert updates == [("1/2", 0.5), ("2/2", 1.0)]

        tools = {t.name: t for t in await server.list_tools()}
        image = await tools["mcp__everything__get-tiny-image"].call({}, context())
        assert isinstance(image, ToolReturn)
        assert [b["type"] for b in image.content["content"]] == ["text", "image", "text"]
        assert server.starts == 1
        tool = tools["mcp__everything__get-sum"]

    gone = await tool.call({"a": 1, "b": 1}, context())  # the server stopped
    assert isinstance(gone, ToolReturn) and gone.is_error
    assert gone.content.startswith("MCP server 'everything' ")
    assert SECRET not in gone.content
    again = await tool.call({"a": 1, "b": 1}, context())
    assert isinstance(again, ToolReturn) and again.is_error
    assert again.content.startswith("MCP server 'everything' failed to start: ")


async def test_unreachable_url_names_the_server_and_no_secret(started: list[MCPServer]) -> None:
    with everything_http() as config:
        url = config.url  # a port that was free: nothing listens there once the block ends
    server = MCPServer(
        HttpServer(name="remote", url=f"{url}?key={SECRET}", headers={"X-Key": SECRET})
    )
    started.append(server)
    result = await server.call("echo", {"message": "hi"}, None)
    assert result.is_error
    assert result.content.startswith("MCP server 'remote' failed to start: ")
    assert SECRET not in result.content
