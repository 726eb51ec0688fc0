"""An agent's tools given its sandbox: the `shell` and file built-ins rebuilt in the sandbox's
workspace (their functions say how: `__sandbox__`), stdio MCP servers run under bubblewrap
(`with_sandbox`); other tools are left as they are. bubblewrap is checked first: an agent that
asks for a sandbox where it cannot start is not built (`bwrap.SandboxUnavailable`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tools import Tool
from ..toolsets import ToolList, Toolset
from . import Sandbox
from .bwrap import require


def sandboxed(tools: Sequence[Tool | Toolset], sandbox: Sandbox) -> tuple[Tool | Toolset, ...]:
    require(sandbox)
    return tuple(_one(item, sandbox) for item in tools)


def _one(item: Tool | Toolset, sandbox: Sandbox) -> Any:
    if isinstance(item, Tool):
        rebuild = getattr(item.fn, "__sandbox__", None)
        return item if rebuild is None else rebuild(sandbox)
    if isinstance(item, ToolList):
        return ToolList([_one(t, sandbox) for t in item.tools], item.name)
    with_sandbox = getattr(item, "with_sandbox", None)
    return item if with_sandbox is None else with_sandbox(sandbox)
