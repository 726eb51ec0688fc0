"""Loopwright events as ACP `session/update`s: live (a run as it streams) and replayed (a stored
session's history for `session/load`).

Live, text and thinking arrive as deltas (`agent_message_chunk`, `agent_thought_chunk`); the log
keeps only complete replies, so a replay sends each reply's text and thinking whole. A tool call
is announced (`tool_call`, status `pending`, its arguments as `rawInput`) when the reply that
makes it is complete, goes `in_progress` when it starts, and ends `completed` or `failed` with
what the model read as `rawOutput` (a denied or skipped call fails; so does an interrupted one).
Subagents' events are not shown (their approvals are: see `acp.agent`).

ACP wants a tool call's id unique within its session, but a model may use a call id again in a
later step once that call has its result (the OpenAI dialect falls back to `call_<index>`):
`CallIds` gives the first call with an id that id, and each later one `<id>~2`, `<id>~3`, ... It
is the session's, derived from its events in order, so a replay and the prompts after it agree.
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


def announce(
    call: ToolCall, acp_id: str | None = None, *, label: str | None = None
) -> ToolCallStart:
    """The `tool_call` of `call`, under its ACP id (`CallIds`; the call's own id by default),
    titled with its tool's `label` when known (a reply's calls are titled by name: the label
    comes with `tool:started` and `approval:pending`, which retitle the call)."""
    title = label or call.name
    kind = kind_of(call.name)
    return start_tool_call(
        acp_id or call.id, title, kind=kind, status="pending", raw_input=call.args
    )


class CallIds:
    """The ACP ids of one session's tool calls (see the module docstring)."""

    def __init__(self) -> None:
        self._current: dict[str, str] = {}
        """Call id → the ACP id of the last call announced with it."""
        self._uses: dict[str, int] = {}
        self._taken: set[str] = set()
        self._finished: set[str] = set()
        """ACP ids of the calls that have their result."""

    def announced(self, call_id: str) -> str | None:
        """The ACP id of a call a reply makes: a fresh one unless the call with that id is
        still open (the same reply seen again); None when it was announced already."""
        current = self._current.get(call_id)
        if current is not None and current not in self._finished:
            return None
        acp_id = call_id
        while acp_id in self._taken:  # (a model's own id may look like one made here)
            self._uses[call_id] = uses = self._uses.get(call_id, 1) + 1
            acp_id = f"{call_id}~{uses}"
        self._taken.add(acp_id)
        self._current[call_id] = acp_id
        return acp_id

    def of(self, call_id: str) -> str:
        """The ACP id of the last call announced with `call_id` (itself, when none was)."""
        return self._current.get(call_id, call_id)

    def finish(self, call_id: str) -> str:
        """The ACP id of the call with `call_id`, which now has its result."""
        acp_id = self.of(call_id)
        self._finished.add(acp_id)
        return acp_id


def _output(event: ev.ToolOutput, acp_id: str) -> ToolCallProgress:
    return update_tool_call(
        acp_id,
        status="failed" if event.is_error else "completed",
        content=[tool_content(text_block(event.content))],
        raw_output={"content": event.content, "isError": event.is_error},
    )


class Translator:
    """The updates of one live run's events, in order (`updates`), with the tool call ids of
    the session (`ids`)."""

    def __init__(self, ids: CallIds) -> None:
        self.ids = ids
        self._ended: set[str] = set()  # (an interrupted call's output follows: not shown)

    def updates(self, event: ev.Event) -> Iterator[Update]:
        if isinstance(event, ev.TextDelta):
            yield update_agent_message_text(event.delta)
        elif isinstance(event, ev.ThinkingDelta):
            yield update_agent_thought_text(event.delta)
        elif isinstance(event, ev.MessageCompleted):
            for call in event.message.tool_calls:
                if (acp_id := self.ids.announced(call.id)) is not None:
                    yield announce(call, acp_id)
        elif isinstance(event, ev.AgentHandoff):
            yield handoff(event)
        elif isinstance(event, ev.ToolOutput | ev.ToolInterrupted):
            if self.ids.of(event.id) not in self._ended:
                self._ended.add(self.ids.of(event.id))
                yield from _tool(event, self.ids)
        else:
            yield from _tool(event, self.ids)


def _tool(event: ev.Event, ids: CallIds) -> Iterator[Update]:
    if isinstance(event, ev.ToolStarted):
        yield update_tool_call(
            ids.of(event.id), title=event.label, status="in_progress", raw_input=event.args
        )
    elif isinstance(event, ev.ToolUpdate):
        content = [tool_content(text_block(event.message))]
        yield update_tool_call(ids.of(event.id), content=content)
    elif isinstance(event, ev.ToolOutput):
        yield _output(event, ids.finish(event.id))
    elif isinstance(event, ev.ToolInterrupted):
        yield update_tool_call(ids.finish(event.id), status="failed")


def replay(event: ev.Event, ids: CallIds) -> Iterator[Update]:
    """A stored event's updates, for `session/load` (the log has no deltas: whole messages),
    with the tool call ids of the session (`ids`, filled in as they come)."""
    if isinstance(event, ev.InputReceived | ev.SteeringInjected):
        yield update_user_message_text(event.message.content)
    elif isinstance(event, ev.MessageCompleted):
        for part in event.message.parts:
            if isinstance(part, Thinking) and part.text:
                yield update_agent_thought_text(part.text)
            elif isinstance(part, Text) and part.text:
                yield update_agent_message_text(part.text)
            elif isinstance(part, ToolCall) and (acp_id := ids.announced(part.id)) is not None:
                yield announce(part, acp_id)
    elif isinstance(event, ev.ToolStarted | ev.ToolOutput | ev.ToolInterrupted):
        yield from _tool(event, ids)
    elif isinstance(event, ev.AgentHandoff):
        yield handoff(event)


def handoff(event: ev.AgentHandoff) -> Update:
    """A handoff (docs/handoffs.md), as a thought chunk: the session goes on with `to`."""
    return update_agent_thought_text(f"→ handed off from {event.from_} to {event.to}\n")


def stop_reason(done: ev.Done) -> Any:
    """ACP's stop reason for a run that ended with `done` (`max_tokens` is ACP's own)."""
    if done.stop_reason == "aborted":
        return "cancelled"
    if done.stop_reason == "max_turns":
        return "max_turn_requests"
    if done.stop_reason == "max_tokens":
        return "max_tokens"
    return "end_turn"
