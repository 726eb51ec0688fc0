"""MCP servers as tools (SPEC §3.7; the `loopwright[mcp]` extra, on the official `mcp` SDK).

    from loopwright.mcp import MCPServer, load_config, servers_from
    agent = Agent(..., tools=[*servers_from("mcp.json")])

Each server of an `mcp.json` is a `Toolset` (`MCPServer`) whose tools are named
`mcp__<server>__<tool>`. Importing this package does not import the SDK: that happens when a
server starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .config import HttpServer, ServerConfig, StdioServer, load_config
from .naming import tool_name
from .server import MCPServer

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "HttpServer",
    "MCPServer",
    "ServerConfig",
    "StdioServer",
    "load_config",
    "servers_from",
    "servers_in",
    "tool_name",
    "with_servers",
]


def servers_from(path: str | Path) -> list[MCPServer]:
    """A toolset for each server of an `mcp.json` file (`ConfigError` if it is not valid)."""
    return [MCPServer(config) for config in load_config(path)]


def servers_in(folder: Path) -> list[MCPServer]:
    """The servers of `folder/mcp.json`, none when there is no such file."""
    path = folder / "mcp.json"
    return servers_from(path) if path.is_file() else []


def with_servers(agent: Agent, servers: Sequence[MCPServer]) -> Agent:
    """`agent` with these servers among its tools, but those named like a server it already
    has (an agent folder's own mcp.json overrides the project's)."""
    have = {t.name for t in agent.tools if isinstance(t, MCPServer)}
    extra = [s for s in servers if s.name not in have]
    return replace(agent, tools=[*agent.tools, *extra]) if extra else agent
