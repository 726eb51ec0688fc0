"""`read_result`: the built-in tool that reads back a large tool result by range.

A result over its call's `max_output` is stored whole in a durable session's store and the model
reads a preview naming it (`loop.stored`, docs/large-results.md). This tool returns exactly the
characters `[offset, offset + length)` of such a result. It is gated like any tool (a rule on
`read_result` allows, asks or denies it), and reads only references its own session's history
names. In a session without a store (in memory) nothing was kept: it says so.
"""

from __future__ import annotations

from ..errors import ToolError
from ..tools import ToolContext, tool

__all__ = ["MAX_READ", "read_result"]

MAX_READ = 40_000
"""Characters one call returns at most (under the default tool limit of 50,000)."""


@tool(name="read_result", idempotent=True, max_output=MAX_READ)
async def read_result(ref: str, ctx: ToolContext, offset: int = 0, length: int = 20_000) -> str:
    """Read a range of a large tool result that was stored whole (its preview names its
    reference, `result:…`). Returns exactly the characters from `offset` (0-based) on, at most
    `length` (≤ 40,000) of them; past the end, nothing.

    Args:
        ref: The reference the preview gives, e.g. `result:3f2a…`.
        offset: The first character to read (0 is the start of the result).
        length: How many characters to read, 1 to 40,000.
    """
    if offset < 0 or not 0 < length <= MAX_READ:
        raise ToolError(f"offset must be ≥ 0 and length between 1 and {MAX_READ}")
    if ctx.results is None:
        raise ToolError("this session keeps no store: only the preview of a large result was kept")
    text = await ctx.results(ref)
    if text is None:
        raise ToolError(f"no stored result {ref!r} in this session")
    return text[offset : offset + length]
