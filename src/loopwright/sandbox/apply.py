"""An agent's tools given its sandbox: the `shell` and file built-ins rebuilt in the sandbox's
workspace (their functions say how: `__sandbox__`), stdio MCP servers run under bubblewrap
(`with_sandbox`); other tools are left as they are. bubblewrap is checked first: an agent that
asks for a sandbox where it cannot start is not built (`bwrap.SandboxUnavailable`). With an
allow-list of hosts the agent gets its proxy (`proxy.NetworkProxy`), a toolset without tools
first among its tools: its owner starts it with a run and stops it on close; the sandbox the
tools are given carries it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..tools import Tool
from ..toolsets import ToolList, Toolset
from . import Sandbox
from .bwrap import require
from .proxy import NetworkProxy


def sandboxed(tools: Sequence[Tool | Toolset], sandbox: Sandbox) -> tuple[Tool | Toolset, ...]:
    require(sandbox)
    if isinstance(sandbox.network, str):
        return tuple(_one(item, sandbox) for item in tools)
    proxies = [
        t for t in tools if isinstance(t, NetworkProxy)
    ]  # an agent built again keeps its own
    proxy = next((p for p in proxies if p.allowed == sandbox.network), None)
    proxy = proxy or NetworkProxy(sandbox.network)
    sandbox = dataclasses.replace(sandbox)
    object.__setattr__(sandbox, "proxy", proxy)
    return (proxy, *(_one(t, sandbox) for t in tools if not isinstance(t, NetworkProxy)))


def _one(item: Tool | Toolset, sandbox: Sandbox) -> Any:
    if isinstance(item, Tool):
        rebuild = getattr(item.fn, "__sandbox__", None)
        return item if rebuild is None else rebuild(sandbox)
    if isinstance(item, ToolList):
        return ToolList([_one(t, sandbox) for t in item.tools], item.name)
    with_sandbox = getattr(item, "with_sandbox", None)
    return item if with_sandbox is None else with_sandbox(sandbox)
