"""An MCP server of the `mcp` SDK (over stdio) for test_idempotency.py: its tool `meta_key`
answers with what the call's `_meta` said under loopwright's idempotency key, as `KEY=value`."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

KEY = "dev.loopwright/idempotencyKey"
server = MCPServer("bank")


@server.tool(structured_output=False)
async def meta_key(ctx: Context) -> str:
    """Say which idempotency key the call carried."""
    meta = ctx.request_context.meta or {}
    return f"{KEY}={meta.get(KEY)}"


if __name__ == "__main__":
    server.run()
