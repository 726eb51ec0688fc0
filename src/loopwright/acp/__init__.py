"""`loopwright acp AGENT`: an agent of the project spoken to over the Agent Client Protocol on
stdio, so editors (Zed, JetBrains, Neovim...) and headless clients (acpx) can talk to it, watch
its tool calls and approve them (the `loopwright[acp]` extra: the official Python SDK).

A thin adapter over the one runtime (`loopwright.runtime.Runtime`): sessions are the project's
durable sessions, approvals go through the same single authority as every other door. See
docs/acp.md, `acp.agent` for the requests and `acp.updates` for the events' mapping.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, cast

from ..agent import Agent
from ..runtime import Runtime

__all__ = ["serve"]


async def serve(runtime: Runtime, agent: Agent, tenant: str, root: str) -> None:
    """Speak ACP on this process's stdin and stdout until the client closes stdin."""
    import acp
    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

    from .agent import AcpAgent

    with _protocol_stdout():
        reader, writer = await acp.stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    adapter = AcpAgent(runtime, agent, tenant, root)
    try:
        await acp.run_agent(cast(Any, adapter), writer, reader)
    finally:
        await adapter.close()


@contextlib.contextmanager
def _protocol_stdout() -> Iterator[None]:
    """Keep the real stdout for the protocol alone: it moves to a descriptor of its own (which
    `sys.stdout` names while the SDK takes it), and descriptor 1 becomes a copy of stderr, so that
    whatever else writes to stdout — a tool's `print`, a subprocess it starts — lands on stderr
    instead of corrupting the protocol."""
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = protocol
    try:
        yield
    finally:
        sys.stdout = sys.stderr
