"""MCP servers as tools (SPEC §3.7; the `loopwright[mcp]` extra, on the official `mcp` SDK).

    from loopwright.mcp import MCPServer, load_config, servers_from
    agent = Agent(..., tools=[*servers_from("mcp.json")])

Each server of an `mcp.json` is a `Toolset` (`MCPServer`) whose tools are named
`mcp__<server>__<tool>`. Importing this package does not import the SDK: that happens when a
server starts.
"""

from __future__ import annotations

from pathlib import Path

from .config import HttpServer, ServerConfig, StdioServer, load_config
from .naming import tool_name
from .server import MCPServer

__all__ = [
    "HttpServer",
    "MCPServer",
    "ServerConfig",
    "StdioServer",
    "load_config",
    "servers_from",
    "tool_name",
]


def servers_from(path: str | Path) -> list[MCPServer]:
    """A toolset for each server of an `mcp.json` file (`ConfigError` if it is not valid)."""
    return [MCPServer(config) for config in load_config(path)]
