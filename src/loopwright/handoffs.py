"""Handoffs: an agent hands the whole conversation to another (docs/handoffs.md).

`Agent(handoffs=[billing, "support", Handoff("refunds", history="summary")])` gives the model one
tool per target, `transfer_to_<name>`, described by the target's description, gated by the rules
like any tool. When one succeeds, the run logs `agent:handoff` and goes on with the target — its
persona, model, tools, rules and hooks — in the same run and log (`loop.handoff`); the session's
state names the active agent, so a resumed or forked session goes on with it. `history` says
what the target sees: `full` (the default), `last_user` or `summary` (`state.handoffs`).

A name is resolved when the handoff happens: among the agents that know each other through
their `handoffs` (Agent objects join one roster, so `triage -> billing -> "triage"` cycles work),
then among the runtime's agents (a project's agent.yaml files).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .errors import ConfigError
from .tools import Tool, tool

HistoryMode: TypeAlias = Literal["full", "last_user", "summary"]
HISTORY_MODES: tuple[HistoryMode, ...] = ("full", "last_user", "summary")


@dataclass(frozen=True, slots=True)
class Handoff:
    """A target (an `Agent`, or an agent's name) and what of the history it goes on with."""

    agent: Any
    """An `Agent`, or the name of one (resolved when the handoff happens)."""
    history: HistoryMode = "full"

    def __post_init__(self) -> None:
        if self.history not in HISTORY_MODES:
            raise ConfigError(f"handoff history must be one of {list(HISTORY_MODES)}")
        if not isinstance(self.agent, str) and not hasattr(self.agent, "instructions"):
            raise ConfigError(f"a handoff's target is an Agent or a name, not {self.agent!r}")

    @classmethod
    def of(cls, given: Any) -> Handoff:
        return given if isinstance(given, Handoff) else cls(given)

    @property
    def name(self) -> str:
        return self.agent if isinstance(self.agent, str) else str(self.agent.name)

    @property
    def tool_name(self) -> str:
        return transfer_name(self.name)


def transfer_name(agent: str) -> str:
    """`transfer_to_<agent>`, with what a provider refuses in a tool name made `_`."""
    return ("transfer_to_" + re.sub(r"[^A-Za-z0-9_-]", "_", agent))[:64]


def transfer_tool(handoff: Handoff) -> Tool:
    """The tool the model calls to hand the conversation to `handoff`'s target: no side effect
    (idempotent: a call a crash cut short runs again), "Transferred to <name>." as its result."""
    target = handoff.name
    about = "" if isinstance(handoff.agent, str) else handoff.agent.description
    description = f"Hand the conversation over to the {target} agent. {about}".strip()

    def transfer(reason: str = "") -> str:
        """Hand the conversation over.

        Args:
            reason: Why, in a few words (optional).
        """
        return f"Transferred to {target}."

    return tool(name=handoff.tool_name, description=description, idempotent=True, inline=True)(
        transfer
    )


def transfers(agent_name: str, given: Sequence[Any]) -> tuple[tuple[Handoff, ...], list[Tool]]:
    """An agent's handoffs as values, and their transfer tools (a target twice: `ConfigError`)."""
    handoffs = tuple(Handoff.of(h) for h in given)
    names = [h.tool_name for h in handoffs]
    if len(set(names)) != len(names):
        raise ConfigError(f"agent {agent_name!r}: a handoff target is named twice: {names}")
    return handoffs, [transfer_tool(h) for h in handoffs]


def join(agent: Any, handoffs: Sequence[Handoff]) -> None:
    """Put `agent` and the Agent targets of its handoffs (and those they know) in one roster,
    shared by all of them: a name any of them hands off to is found in it."""
    roster: dict[str, Any] = {agent.name: agent}
    for handoff in handoffs:
        if not isinstance(handoff.agent, str):
            for member in list(handoff.agent._agents.values()):
                roster.setdefault(member.name, member)
    for member in list(roster.values()):
        object.__setattr__(member, "_agents", roster)
