"""An MCP server of the `mcp` SDK (over stdio) whose tool floods its caller with progress, for
test_progress_bounds.py: `flood(count, size)` sends `count` progress notifications, each with
a message of `size` characters (`i/count`, then `x`s), and then answers `flooded`."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("flooder")


@server.tool(structured_output=False)
async def flood(count: int, size: int, ctx: Context) -> str:
    """Send `count` progress notifications of `size` characters each."""
    for i in range(1, count + 1):
        head = f"{i}/{count} "
        await ctx.report_progress(i, count, head + "x" * max(0, size - len(head)))
    return "flooded"


if __name__ == "__main__":
    server.run()
