"""The MCP servers an ACP client passes with `session/new` or `session/load`, as toolsets.

A client names stdio servers (command, args, env) and, when the agent says it can, HTTP ones
(url, headers); each becomes a `loopwright.mcp.MCPServer` laid over the agent's own tools for
that session only. SSE servers (deprecated by MCP) and ACP-transport ones are not supported:
each is skipped with a warning on stderr, never an error, as the protocol's capabilities say.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from ..toolsets import Toolset

logger = logging.getLogger("loopwright.acp")

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def server_name(name: str, taken: set[str]) -> str:
    """A name `loopwright.mcp` accepts (letters, digits, `_`, `-`; at most 40), unique here."""
    base = _UNSAFE.sub("_", name)[:36] or "server"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


def toolsets(servers: Sequence[Any] | None) -> list[Toolset]:
    """A toolset for each server the client passed that loopwright can speak to."""
    if not servers:
        return []
    from acp.schema import HttpMcpServer, McpServerStdio

    from ..mcp import HttpServer, MCPServer, StdioServer

    taken: set[str] = set()
    out: list[Toolset] = []
    for server in servers:
        if isinstance(server, McpServerStdio):
            config: StdioServer | HttpServer = StdioServer(
                name=server_name(server.name, taken),
                command=server.command,
                args=tuple(server.args),
                env={v.name: v.value for v in server.env},
            )
        elif isinstance(server, HttpMcpServer):
            config = HttpServer(
                name=server_name(server.name, taken),
                url=server.url,
                headers={h.name: h.value for h in server.headers},
            )
        else:
            kind = getattr(server, "type", type(server).__name__)
            logger.warning("MCP server %r skipped: %s servers are not supported", server.name, kind)
            continue
        out.append(MCPServer(config))
    return out
