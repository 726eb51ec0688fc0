"""MCP servers over stdio, real ones (installed by scripts/test): `mcp-server-time` (PyPI) and
MCP's reference server `@modelcontextprotocol/server-everything` (npm). Their tools listed with
their names and schemas, called, through a run too; progress as `tool:update`; a cancelled call
cancelled on the server; images, resources and errors mapped; elicitation (a call that pauses
on it: test_mcp_elicit*.py); list_changed. (Servers that fail: test_mcp_failures.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Session
from loopwright.approvals import Answer, QuestionRequest
from loopwright.events import ToolUpdate
from loopwright.mcp import MCPServer, StdioServer
from loopwright.tools import NeedsAnswer, ToolReturn
from mcp_servers import (
    EVERYTHING,
    context,
    everything_stdio,
    node,
    time_server,
    tools_of,
)


async def test_time_server_tools_names_and_schemas(started: list[MCPServer]) -> None:
    server = MCPServer(time_server())
    started.append(server)
    tools = await tools_of(server)
    assert list(tools) == ["mcp__time__get_current_time", "mcp__time__convert_time"]
    current = tools["mcp__time__get_current_time"]
    assert current.parameters["required"] == ["timezone"]
    assert current.parameters["properties"]["timezone"]["type"] == "string"
    assert current.description.startswith("Get current time in a specific timezone")
    assert tools["mcp__time__convert_time"].parameters["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]
    with pytest.raises(ValueError) as bad:
        current.validate({"timezone": 3})
    assert str(bad.value) == "timezone: 3 is not of type 'string'"
    with pytest.raises(ValueError) as missing:
        current.validate({})
    assert str(missing.value) == "(arguments): 'timezone' is a required property"

    result = await current.call(current.validate({"timezone": "Europe/Paris"}), context())
    assert isinstance(result, ToolReturn) and not result.is_error
    shown = json.loads(result.content)  # text; its structured content is the same JSON
    assert shown["timezone"] == "Europe/Paris"
    assert set(shown) == {"timezone", "datetime", "day_of_week", "is_dst"}

    failed = await current.call({"timezone": "Mars/Olympus"}, context())
    assert failed == ToolReturn(
        content="Error executing tool get_current_time: Invalid timezone: "
        "'No time zone found with key Mars/Olympus'",
        is_error=True,
    )
    assert await server.call("no_such_tool", {}, None) == ToolReturn(
        content="MCP server 'time' refused the call: Unknown tool: no_such_tool", is_error=True
    )
    assert server.starts == 1


async def test_a_run_calls_an_mcp_tool(started: list[MCPServer]) -> None:
    """Through a run: listed before the model's request, gated, called, logged as any tool."""
    server = MCPServer(time_server())
    started.append(server)
    model = scripted(
        {
            "tool_calls": [
                call(
                    "mcp__time__convert_time",
                    source_timezone="UTC",
                    time="12:00",
                    target_timezone="Asia/Tokyo",
                )
            ]
        },
        "It is 21:00 in Tokyo.",
    )
    result = await drive(Session(Agent(model=model, tools=[server])).run("noon UTC in Tokyo?"))
    assert [s.name for s in model.requests[0].tools] == [
        "mcp__time__get_current_time",
        "mcp__time__convert_time",
    ]
    [outcome] = [e for e in result.events if e.type == "tool:output"]
    assert outcome.tool == "mcp__time__convert_time" and not outcome.is_error
    converted = json.loads(outcome.content)
    assert converted["source"]["timezone"] == "UTC"
    assert converted["target"]["timezone"] == "Asia/Tokyo"
    assert converted["time_difference"] == "+9.0h"
    assert result.text == "It is 21:00 in Tokyo."


async def test_progress_becomes_tool_updates(started: list[MCPServer]) -> None:
    server = MCPServer(everything_stdio())
    started.append(server)
    model = scripted(
        {
            "tool_calls": [
                call("mcp__everything__trigger-long-running-operation", duration=0.3, steps=3)
            ]
        },
        "done",
    )
    result = await drive(Session(Agent(model=model, tools=[server])).run("go"))
    updates = [
        (e.id, e.tool, e.message, e.progress) for e in result.events if e.type == "tool:update"
    ]
    name = "mcp__everything__trigger-long-running-operation"
    call_id = f"{name}_1"
    assert updates == [
        (call_id, name, "1/3", 1 / 3),
        (call_id, name, "2/3", 2 / 3),
        (call_id, name, "3/3", 1.0),
    ]
    [outcome] = [e for e in result.events if e.type == "tool:output"]
    assert outcome.content == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."


async def test_image_and_resource_results_kept_whole(started: list[MCPServer]) -> None:
    tools = await tools_of(server := MCPServer(everything_stdio()))
    started.append(server)
    image = await tools["mcp__everything__get-tiny-image"].call({}, context())
    assert isinstance(image, ToolReturn) and not image.is_error
    blocks = image.content["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert blocks[1]["mimeType"] == "image/png" and blocks[1]["data"].startswith("iVBORw0KGgo")

    resource = await tools["mcp__everything__get-resource-reference"].call(
        {"resourceType": "Text", "resourceId": 1}, context()
    )
    assert isinstance(resource, ToolReturn)
    embedded = resource.content["content"][1]
    assert embedded["type"] == "resource"
    assert embedded["resource"]["uri"] == "demo://resource/dynamic/text/1"
    assert embedded["resource"]["mimeType"] == "text/plain"

    structured = await tools["mcp__everything__get-structured-content"].call(
        {"location": "New York"}, context()
    )
    assert isinstance(structured, ToolReturn)
    assert json.loads(structured.content) == {
        "temperature": 33,
        "conditions": "Cloudy",
        "humidity": 82,
    }


async def test_a_cancelled_call_is_cancelled_on_the_server(
    tmp_path: Path, started: list[MCPServer]
) -> None:
    """Cancelling the call's task sends `notifications/cancelled` for its request (read from
    what the server received: its stdin goes through `tee`)."""
    wire = tmp_path / "to-server.jsonl"
    config = StdioServer(
        name="everything",
        command="sh",
        args=("-c", 'tee "$0" | exec "$1" "$2" stdio', str(wire), node(), str(EVERYTHING)),
    )
    tools = await tools_of(server := MCPServer(config))
    started.append(server)
    first = asyncio.Event()
    events: list[Any] = []
    ctx = context(events)
    ctx._emit = lambda event: (events.append(event), first.set())
    running = asyncio.create_task(
        tools["mcp__everything__trigger-long-running-operation"].call(
            {"duration": 30, "steps": 30}, ctx
        )
    )
    async with asyncio.timeout(30):  # a stuck-guard
        await first.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # a later call's answer means the server has read everything sent before it
    echoed = await tools["mcp__everything__echo"].call({"message": "after"}, context())
    assert echoed == ToolReturn(content="Echo: after")
    sent = [json.loads(line) for line in wire.read_text().splitlines()]
    [request] = [
        m
        for m in sent
        if m.get("method") == "tools/call"
        and m["params"]["name"] == "trigger-long-running-operation"
    ]
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [request["id"]]
    assert isinstance(events[0], ToolUpdate) and events[0].message == "1/30"


async def test_elicitation_is_a_question_to_the_person(started: list[MCPServer]) -> None:
    """The server's elicitation goes to the live approver as a question; the answer, checked
    against the server's form (defaults filled in), goes back as `accept`."""
    tools = await tools_of(server := MCPServer(everything_stdio()))
    started.append(server)
    trigger = tools["mcp__everything__trigger-elicitation-request"]  # listed once it knew we elicit
    asked: list[QuestionRequest] = []

    def person(request: Any) -> Answer:
        asked.append(request)
        return Answer(text='{"name": "Ada Lovelace", "check": true}')

    result = await trigger.call({}, context(approver=person))
    assert isinstance(result, ToolReturn) and not result.is_error
    assert result.content.startswith(
        "✅ User provided the requested information!\n\nUser inputs:\n- Name: Ada Lovelace\n"
        "- Agreed to terms: true\n"
    )
    assert "- Favorite Integer: 42\n- Favorite Number: 3.14" in result.content  # defaults
    [question] = asked
    assert question.question.startswith(
        "The MCP server 'everything' asks: Please provide inputs for the following fields:\n"
        "- name (string): Your full, legal name\n"
    )
    assert (question.agent, question.session_id, question.call.id) == ("a", "s", "c1")

    nobody = await trigger.call({}, context())  # no live approver: the call pauses on it
    assert nobody == NeedsAnswer(question.question, None)  # (test_mcp_elicit*.py: the rest)


async def test_list_changed_lists_again(started: list[MCPServer]) -> None:
    """`notifications/tools/list_changed` changes the version; the next listing fetches again
    (the reference server adds the tools that need our capabilities right after connecting)."""
    server = MCPServer(everything_stdio())
    started.append(server)
    await server.enter()
    version = server.version
    server.tools_changed()
    assert server.version == version + 1
    names = [t.name for t in await server.list_tools()]
    assert "mcp__everything__trigger-elicitation-request" in names
    assert server.version == version + 1  # the same tools: no further change


async def test_the_durable_runtimes_approvers_are_not_asked(started: list[MCPServer]) -> None:
    """They answer from the log, which has no item for an elicitation: the call pauses on it
    (test_mcp_elicit*.py: the item it becomes)."""
    from loopwright.runtime.approvers import held

    tools = await tools_of(server := MCPServer(everything_stdio()))
    started.append(server)
    approver = held(None, None, None)  # type: ignore[arg-type]  # never called
    result = await tools["mcp__everything__trigger-elicitation-request"].call(
        {}, context(approver=approver)
    )
    assert isinstance(result, NeedsAnswer)
    assert result.question.startswith("The MCP server 'everything' asks: Please provide inputs")


async def test_a_terminal_behind_the_runtimes_approver_is_asked(started: list[MCPServer]) -> None:
    """`loopwright run` at a terminal: the runtime wraps its prompt in an approver answering from
    the log; an elicitation, which no item of the log stands for, goes to the prompt itself. A
    held stream's approver, wrapped the same way, has nobody to ask: the call pauses on it."""
    from loopwright.runtime.approvers import authoritative, held

    tools = await tools_of(server := MCPServer(everything_stdio()))
    started.append(server)
    trigger = tools["mcp__everything__trigger-elicitation-request"]
    asked: list[Any] = []

    def terminal(request: Any) -> Answer:
        asked.append(request)
        return Answer(text='{"name": "Ada Lovelace", "check": true}')

    wrapped = authoritative(terminal, None, {}, None, None)  # type: ignore[arg-type]  # unused
    result = await trigger.call({}, context(approver=wrapped))
    assert isinstance(result, ToolReturn) and not result.is_error
    assert result.content.startswith("✅ User provided the requested information!")
    assert len(asked) == 1
    stream = authoritative(held(None, None, None), None, {}, None, None)  # type: ignore[arg-type]
    paused = await trigger.call({}, context(approver=stream))
    assert paused == NeedsAnswer(asked[0].question, None)
