"""The switch of a handoff (`loopwright.handoffs`): when one is due, who the target is, the
summary the source's model writes for it, and the session made to go on with it.

A handoff is due when the last reply's first transfer call has a result that is not an error
and no `agent:handoff` acted on it yet (`SessionState.handoff_call`): derived from the state,
so the run that made the call (after its step: `Steps.proceed`), the one that resumes it
after an approval and the one that recovers it after a crash (after the batch: `_opening`) all
find it. `Steps.hand_off` logs it and takes the target's collaborators (`Steps.equip`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from .. import events as ev
from ..agent import Agent
from ..errors import ConfigError
from ..gate.permissions import Gate
from ..handoffs import Handoff
from ..hooks import RunInfo
from ..messages import AssistantMessage, ToolCall, ToolResultMessage
from ..models import Model
from ..models.registry import get_model
from ..state.compaction import SummaryFailed, summarize, summary_settings
from ..state.session_state import SessionState

_log = logging.getLogger("loopwright.handoffs")

SUMMARY_PROMPT = (
    "You are handing this conversation over to another agent. Summarise it for them: what the "
    "user wants, what was found or done so far, and what is still open. Plain prose, no preamble."
)


def due(agent: Agent, state: SessionState) -> tuple[ToolCall, Handoff] | None:
    """The transfer call of the last reply a handoff is due for, with its handoff; or None."""
    results: dict[str, ToolResultMessage] = {}
    for message in reversed(state.history.messages):
        if isinstance(message, ToolResultMessage):
            results[message.call_id] = message
        elif isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                handoff, result = agent._handoffs.get(call.name), results.get(call.id)
                if handoff is not None and result is not None and not result.is_error:
                    return None if call.id == state.handoff_call else (call, handoff)
            return None
    return None


def second_transfers(agent: Agent, calls: list[ToolCall]) -> dict[str, str]:
    """Call id → why it will not run, for the transfer calls of a reply after its first: the
    first handoff wins (as in the OpenAI Agents SDK)."""
    asked = [c for c in calls if c.name in agent._handoffs]
    why = "Not run: only one handoff per reply, and {} was asked for first."
    return {c.id: why.format(asked[0].name) for c in asked[1:]}


def target(agent: Agent, name: str, session: Any) -> Agent:
    """The agent `name` names: in the roster of the agents that know each other, else among
    the runtime's (a durable session's journal knows them). Unknown: `ConfigError`."""
    found = agent._agents.get(name)
    if found is None:
        found = getattr(getattr(session, "journal", None), "agents", {}).get(name)
    if found is None:
        raise ConfigError(f"agent {agent.name!r} hands off to {name!r}, which is no known agent")
    return found  # type: ignore[no-any-return]


async def handing_off(steps: Any) -> tuple[ev.AgentHandoff, Agent, Model, Gate, RunInfo] | None:
    """When a transfer is due for the run (`Steps`, not imported: it imports this), its
    `agent:handoff` and what the run holds for the target from now on. The summary, for
    `summary`, is the source's model's (none when it cannot write one: the target sees the
    last user message)."""
    agent, state, info, session = steps.agent, steps.state, steps.info, steps.session
    if (found := due(agent, state)) is None:
        return None
    (call, handoff), to = found, target(agent, found[1].name, session)
    if to._live and session is not None:  # its live toolsets entered, as a run enters its own
        await to.refresh_tools(session.toolsets)
    summary = None
    if handoff.history == "summary":
        settings = summary_settings(info.settings.over(agent.settings), 1024)
        try:
            async with asyncio.timeout(agent.retry.deadline):
                summary = await summarize(
                    steps.model, state.history.messages, settings, info.session_id, SUMMARY_PROMPT
                )
        except (SummaryFailed, TimeoutError) as exc:
            _log.warning("handoff %s -> %s: no summary (%s)", agent.name, to.name, exc)
    event = ev.AgentHandoff(
        from_=agent.name, to=to.name, call_id=call.id, history=handoff.history, summary=summary
    )
    return (event, *switched(to, info, session))


def activate(session: Any, agent: Agent) -> None:
    """The session's runs go on with `agent` (its gate; its tools for a paused batch)."""
    if session is None:  # (steps made without one)
        return
    session.agent, session._gate, session.state.tools = agent, agent.gate(), agent._by_name


def switched(to: Agent, info: RunInfo, session: Any) -> tuple[Agent, Model, Gate, RunInfo]:
    """What a run holds for its agent, for `to` (the session's runs go on with it too)."""
    activate(session, to)
    return to, get_model(to.model), to.gate(), replace(info, agent=to.name)


def following(steps: Any) -> tuple[Agent, Model, Gate, RunInfo]:
    """What a run (`Steps`) holds for its agent: the active agent's, when the session's state
    names another than the session's (one read from its log, or forked, after a handoff: made
    with its first agent)."""
    name, session = steps.state.agent, steps.session
    if name is None or name == steps.agent.name:
        return steps.agent, steps.model, steps.gate, steps.info
    return switched(target(steps.agent, name, session), steps.info, session)
