"""The client the MCP conformance suite drives (`@modelcontextprotocol/conformance client
--command "python tests/mcp_conformance_client.py"`): it appends the URL of the scenario's test
server and names the scenario in MCP_CONFORMANCE_SCENARIO. loopwright's own MCP toolset
connects, lists the tools and calls them as a run would (each through its `Tool`: arguments
checked against the server's schema, then called); a server's elicitation is answered by a
person who accepts the form as it is (its defaults)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from loopwright.approvals import Answer
from loopwright.mcp import HttpServer, MCPServer
from loopwright.tools import ToolContext


def person(request: Any) -> Answer:
    return Answer(text="{}")


async def main(url: str, scenario: str) -> int:
    server = MCPServer(HttpServer(name="conformance", url=url))
    try:
        await server.connect()
        tools = list(await server.list_tools())
        print(json.dumps({"scenario": scenario, "tools": [t.name for t in tools]}))
        if scenario.startswith("elicitation"):
            tools = [t for t in tools if t.name.endswith("test_client_elicitation_defaults")]
        for tool in tools[:1]:
            ctx = ToolContext(session_id="conformance", tenant="t", agent="a", call_id="c1")
            ctx.approver = person
            args = {"a": 2, "b": 3} if tool.parameters.get("properties") else {}
            result = await tool.call(tool.validate(args), ctx)
            print(json.dumps({"tool": tool.name, "result": repr(result)}))
    finally:
        await server.exit()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))))
