"""What a running call streams besides its result, bounded as its result is.

A tool reports progress (`ToolContext.progress`; an MCP server's progress notifications) and may
emit other events (`ToolContext.emit`). Each one goes into the log and onto every stream, so a
call's share is bounded by the same rules as its result (P10):

- one update's message is cut at `MAX_UPDATE` characters (its head, and a mark that says how
  many characters were cut);
- a call keeps at most `MAX_UPDATES` of the events it emits, and at most its result's limit
  (`Tool.max_output`, else `Agent.max_tool_output`) of progress text in all;
- what comes past either bound is dropped, and when the call is over one more `tool:update`
  (before its result) says what was dropped: how many updates, how many characters; it carries
  the last fraction the dropped updates reported.

A subagent's events (`subagent:event`) are not counted here: the child's own run bounds its
calls. What a call reports once it is over is dropped, and logged to `loopwright.tools`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from .. import events as ev
from .. import redact
from ..tools import Scheduled

log = logging.getLogger("loopwright.tools")

MAX_UPDATE = 1_000
"""Characters of one progress message kept; a longer one is cut."""
MAX_UPDATES = 200
"""Events one call may emit (progress and others, a subagent's aside); later ones are dropped."""


def cut(text: str, cap: int) -> str:
    """`text` if it fits in `cap` characters, else its head and a mark saying how much is cut."""
    if len(text) <= cap:
        return text
    return f"{redact.head(text, cap)}… [{len(text) - cap:,} characters cut]"


class CallEvents:
    """A call's `emit`: bounds what it emits (see the module) until the call is `close`d."""

    __slots__ = (
        "cap",
        "chars",
        "dropped",
        "dropped_chars",
        "emit",
        "fraction",
        "item",
        "kept",
        "over",
    )

    def __init__(self, emit: Callable[[ev.Event], None], item: Scheduled, cap: int) -> None:
        self.emit, self.item, self.cap = emit, item, cap
        self.kept = self.chars = self.dropped = self.dropped_chars = 0
        self.fraction: float | None = None
        self.over = False

    def __call__(self, event: ev.Event) -> None:
        if self.over:
            what = (self.item.call.name, self.item.call.id, event.type)
            log.warning("tool %s (call %s) reported %s after its result; dropped", *what)
            return
        if type(event) is ev.SubagentEvent:
            self.emit(event)
            return
        size = said = 0
        if type(event) is ev.ToolUpdate:
            size = said = len(event.message)
            if said > MAX_UPDATE:
                event = replace(event, message=cut(event.message, MAX_UPDATE))
                size = len(event.message)
        if self.kept >= MAX_UPDATES or self.chars + size > self.cap:
            self.dropped += 1
            self.dropped_chars += said
            if type(event) is ev.ToolUpdate and event.progress is not None:
                self.fraction = event.progress
            return
        self.kept += 1
        self.chars += size
        self.emit(event)

    def close(self) -> None:
        """The call is over: one update saying what was dropped, if anything was."""
        if self.dropped and not self.over:
            note = (
                f"[progress cut: {self.dropped:,} more updates ({self.dropped_chars:,} "
                f"characters) dropped; a call keeps {MAX_UPDATES} updates and {self.cap:,} "
                "characters of progress]"
            )
            call = self.item.call
            self.emit(
                ev.ToolUpdate(id=call.id, tool=call.name, message=note, progress=self.fraction)
            )
        self.over = True
