"""What an `agent:handoff` does to a session's state: the active agent, and the history the
target goes on with (docs/handoffs.md). Live and when the log is read alike (`replay`).

    full       the history as it is (the transfer call and its result included)
    last_user  the app's custom messages and the last user message only
    summary    the source's summary as a user message, then the last user message (no summary
               written: as `last_user`)
"""

from __future__ import annotations

from .. import events as ev
from ..messages import CustomMessage, Message, UserMessage, message_chars
from .session_state import SessionState

SUMMARY_HEADER = "[Summary of the conversation so far, written by the agent that handed it over:]"


def handed_off(state: SessionState, event: ev.AgentHandoff) -> None:
    state.agent, state.handoff_call = event.to, event.call_id
    if event.history == "full":
        return
    history = state.history
    kept: list[Message] = [m for m in history.messages if type(m) is CustomMessage]
    if event.history == "summary" and event.summary:
        kept.append(UserMessage(content=f"{SUMMARY_HEADER}\n{event.summary}"))
    last = next((m for m in reversed(history.messages) if type(m) is UserMessage), None)
    if last is not None:
        kept.append(last)
    history.messages = kept
    history.chars = sum(message_chars(m) for m in kept)
    history.reported_tokens, history.compacted_at = None, len(kept)
