"""loopwright with its sync tool marked `inline=True`: `ping` runs on the event loop itself
instead of in a worker thread (loopwright's default for sync tools). Everything else is
`loopwright_adapter`'s; the difference between the two rows is the thread hop per call."""

from __future__ import annotations

import loopwright_adapter as base
from loopwright_adapter import VERSION, long_loop, many_sessions, streaming, wide_batch

from loopwright import tool

base.ping_tool = tool(base.scenarios.ping, inline=True)  # what ping_agent() gives its agents

__all__ = ["VERSION", "long_loop", "many_sessions", "streaming", "wide_batch"]
