"""The label of a pending approval's tool, for the doors' pending listings (`GET /pending`,
`/agents/{name}/approvals`, `loopwright approvals list`).

A pending row keeps the tool's name, not its label: the label is the tool's as the loaded agent
defines it (a subagent's item: the subagent's tool, found down the chain of sessions as
`decisions.descend` finds it). None for a question, a tool without a label, or an agent that is
not loaded (or no longer has the tool)."""

from __future__ import annotations

from collections.abc import Mapping

from ..agent import Agent
from ..errors import ConfigError
from ..store import PendingRecord
from ..store.log import ReadModels
from .decisions import chain, descend, key_of


async def label_of(log: ReadModels, agents: Mapping[str, Agent], item: PendingRecord) -> str | None:
    """The label of `item`'s tool (see the module)."""
    if item.kind != "approval":
        return None
    keys = await chain(log, key_of(item)) if "/" in item.session_id else [key_of(item)]
    root = agents.get(keys[-1].agent)
    if root is None:
        return None
    try:
        agent = descend(root, keys)
    except ConfigError:
        return None
    tool = agent.find_tool(item.tool)
    return tool.label if tool is not None else None
