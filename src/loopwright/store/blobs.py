"""Attachments' bytes in the event log: stored once by SHA-256, beside the events that name them.

Events and messages carry references (`{type, mediaType, sha256, size, name?}`), never the
bytes, so the log does not repeat an image's base64 on every event and snapshot. A backend writes
`rows(events)` into its attachment table in the transaction that appends the events (a hash
stored already is left as it is: the same image twice is one row), and a session read back gets
its bytes with `resolve`, so that a provider can send them again.

The table is keyed by hash alone (not by tenant): a reference is only ever resolved for a session
whose own logged events name it, and a client can only make one by sending the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from .. import events as ev
from ..attachments import Attachment
from ..messages import Message, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from ..state.session_state import SessionState

SQLITE_TABLE = """
CREATE TABLE attachments (
    sha256 TEXT PRIMARY KEY, media_type TEXT NOT NULL, size INTEGER NOT NULL,
    data BLOB NOT NULL, at TEXT NOT NULL) WITHOUT ROWID
"""

PG_TABLE = """
CREATE TABLE loopwright_attachments (
    sha256 text PRIMARY KEY, media_type text NOT NULL, size bigint NOT NULL,
    data bytea NOT NULL, at text NOT NULL)
"""

Row = tuple[str, str, int, bytes, str]


def in_events(events: Iterable[ev.Event]) -> Iterator[Attachment]:
    """Every attachment the events carry (input, steering, a tool's output, replies)."""
    for event in events:
        if isinstance(event, (ev.InputReceived, ev.SteeringInjected)):
            yield from event.message.attachments or ()
        elif isinstance(event, ev.ToolOutput):
            yield from event.attachments or ()
            if event.stored is not None:  # a large result's whole text (`loop.stored`)
                yield event.stored


_CARRYING = frozenset({"input:received", "steering:injected", "tool:output"})
"""The types of the events `in_events` finds attachments in."""


def rows(events: Sequence[ev.Event], at: str) -> list[Row]:
    """The attachment rows to store with `events`: one per hash whose bytes are at hand."""
    found: dict[str, Row] = {}
    carrying = [e for e in events if e.type in _CARRYING]  # (most commits: none)
    for item in in_events(carrying) if carrying else ():
        data = item.data
        if item.sha256 is not None and data is not None and item.sha256 not in found:
            found[item.sha256] = (item.sha256, item.media_type, len(data), data, at)
    return list(found.values())


def in_messages(messages: Iterable[Message]) -> Iterator[Attachment]:
    for message in messages:
        if isinstance(message, (UserMessage, ToolResultMessage)):
            yield from message.attachments or ()


class Reader(Protocol):
    async def attachments(self, hashes: Sequence[str]) -> dict[str, bytes]:
        """The bytes stored under each of `hashes` that the log has."""
        ...


async def resolve(log: Reader, state: SessionState) -> None:
    """Give the attachments of a state read from the log their bytes (those still missing)."""
    results = state.batch.results.values() if state.batch is not None else ()
    wanted = [
        a
        for a in in_messages([*state.history.messages, *results])
        if a.data is None and a.sha256 is not None
    ]
    if not wanted:
        return
    found = await log.attachments(sorted({a.sha256 for a in wanted if a.sha256}))
    for item in wanted:
        data = found.get(item.sha256 or "")
        if data is not None:
            item.with_data(data)
