"""Loopwright events as ACP `session/update`s: live (a run as it streams) and replayed (a stored
session's history for `session/load`).

Live, text and thinking arrive as deltas (`agent_message_chunk`, `agent_thought_chunk`); the log
keeps only complete replies, so a replay sends each reply's text and thinking whole. A tool call
is announced (`tool_call`, status `pending`, its arguments as `rawInput`) when the reply that
makes it is complete, goes `in_progress` when it starts, and ends `completed` or `failed` with
what the model read as `rawOutput` (a denied or skipped call fails; so does an interrupted one).
Subagents' events are not shown (their approvals are: see `acp.agent`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeAlias

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UserMessageChunk,
)

from .. import events as ev
from ..messages import Text, Thinking, ToolCall

Update: TypeAlias = (
    UserMessageChunk | AgentMessageChunk | AgentThoughtChunk | ToolCallStart | ToolCallProgress
)

_KINDS: tuple[tuple[tuple[str, ...], ToolKind], ...] = (
    (("delete", "remove", "rm"), "delete"),
    (("move", "rename", "mv"), "move"),
    (("edit", "write", "patch", "replace", "create", "update"), "edit"),
    (("search", "grep", "find", "glob"), "search"),
    (("fetch", "http", "download", "browse", "web"), "fetch"),
    (("shell", "bash", "exec", "run", "command", "terminal"), "execute"),
    (("read", "list", "lookup", "get", "show", "view", "cat", "ls"), "read"),
    (("think", "plan"), "think"),
)


def kind_of(tool: str) -> ToolKind:
    """The ACP kind of a tool, guessed from the words of its name (an editor picks an icon
    by it); `other` when no word says. An MCP tool (`mcp__server__tool`) by its own name."""
    words = tool.rsplit("__", 1)[-1].lower().replace("-", "_").split("_")
    for names, kind in _KINDS:
        if any(word in names for word in words):
            return kind
    return "other"


def announce(call: ToolCall) -> ToolCallStart:
    return start_tool_call(
        call.id, call.name, kind=kind_of(call.name), status="pending", raw_input=call.args
    )


def _output(event: ev.ToolOutput) -> ToolCallProgress:
    return update_tool_call(
        event.id,
        status="failed" if event.is_error else "completed",
        content=[tool_content(text_block(event.content))],
        raw_output={"content": event.content, "isError": event.is_error},
    )


class Translator:
    """The updates of one live run's events, in order (`updates`), and what the prompt's
    answer needs: the stop reason of the run's last reply."""

    def __init__(self) -> None:
        self.last_stop: str | None = None
        self._announced: set[str] = set()
        self._finished: set[str] = set()

    def updates(self, event: ev.Event) -> Iterator[Update]:
        if isinstance(event, ev.TextDelta):
            yield update_agent_message_text(event.delta)
        elif isinstance(event, ev.ThinkingDelta):
            yield update_agent_thought_text(event.delta)
        elif isinstance(event, ev.MessageCompleted):
            self.last_stop = event.message.stop_reason
            yield from self._announce(event.message.tool_calls)
        else:
            yield from self._tool(event)

    def _announce(self, calls: list[ToolCall]) -> Iterator[Update]:
        for call in calls:
            if call.id not in self._announced:
                self._announced.add(call.id)
                yield announce(call)

    def _tool(self, event: ev.Event) -> Iterator[Update]:
        if isinstance(event, ev.ToolStarted):
            yield update_tool_call(event.id, status="in_progress", raw_input=event.args)
        elif isinstance(event, ev.ToolUpdate):
            yield update_tool_call(event.id, content=[tool_content(text_block(event.message))])
        elif isinstance(event, ev.ToolOutput) and event.id not in self._finished:
            self._finished.add(event.id)
            yield _output(event)
        elif isinstance(event, ev.ToolInterrupted) and event.id not in self._finished:
            self._finished.add(event.id)
            yield update_tool_call(event.id, status="failed")


def replay(event: ev.Event) -> Iterator[Update]:
    """A stored event's updates, for `session/load` (the log has no deltas: whole messages)."""
    if isinstance(event, ev.InputReceived | ev.SteeringInjected):
        yield update_user_message_text(event.message.content)
    elif isinstance(event, ev.MessageCompleted):
        for part in event.message.parts:
            if isinstance(part, Thinking) and part.text:
                yield update_agent_thought_text(part.text)
            elif isinstance(part, Text) and part.text:
                yield update_agent_message_text(part.text)
            elif isinstance(part, ToolCall):
                yield announce(part)
    elif isinstance(event, ev.ToolStarted):
        yield update_tool_call(event.id, status="in_progress", raw_input=event.args)
    elif isinstance(event, ev.ToolOutput):
        yield _output(event)
    elif isinstance(event, ev.ToolInterrupted):
        yield update_tool_call(event.id, status="failed")


def stop_reason(done: ev.Done, last_stop: str | None) -> Any:
    """ACP's stop reason for a run that ended with `done` (its last reply's stop reason says
    when the model ran out of tokens)."""
    if done.stop_reason == "aborted":
        return "cancelled"
    if done.stop_reason == "max_turns":
        return "max_turn_requests"
    if done.stop_reason == "completed" and last_stop == "max_tokens":
        return "max_tokens"
    return "end_turn"
