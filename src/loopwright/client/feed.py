"""What a stream does with its frames, written once for the sync and the async client: the SSE
lines made into (seq, event), and where the stream stands (`Position`), which decides what a
reconnect asks for and what it must not give twice.

The server gives a frame an `id` (the event's seq) only once the log holds the event; an event
sent before it was committed comes without one, and comes again, with its seq, to a stream
that resumes before it. So `Position` keeps the events it took without a seq since the last
one with a seq; a resumed stream's events equal to those, in order, are the same events and
are dropped. Token deltas are never stored: they are not resent (`message:completed` carries
the whole reply)."""

from __future__ import annotations

from .. import events as ev
from ..wire import loads

DELTAS = frozenset({"text:delta", "thinking:delta", "tool:delta"})


class FrameReader:
    """SSE lines in, one (seq or None, data) per frame out; comments (keep-alives) skipped."""

    def __init__(self) -> None:
        self._id: str | None = None
        self._data: list[str] = []

    def line(self, line: str) -> tuple[int | None, str] | None:
        if line == "":
            data, seq = self._data, self._id
            self._data, self._id = [], None
            if not data:
                return None
            return (int(seq) if seq is not None and seq.isdigit() else None), "\n".join(data)
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


class Position:
    """Where a stream stands: its session (known from its `session` event if not before), the
    last seq it took, and the events it took without a seq since (see the module)."""

    def __init__(self, session_id: str | None, after: int) -> None:
        self.session_id = session_id
        self.last_seq = after
        self.unconfirmed: list[ev.Event] = []
        self.finished = False

    def take(self, seq: int | None, data: str) -> ev.Event | None:
        """The frame's event, or None when the stream already gave it."""
        event = loads(data)
        if seq is not None:
            if seq <= self.last_seq:
                return None
            self.last_seq = seq
            if self.unconfirmed and self.unconfirmed[0] == event:
                del self.unconfirmed[0]
                return None
            self.unconfirmed.clear()
        elif event.type not in DELTAS:
            self.unconfirmed.append(event)
        if isinstance(event, ev.Session) and self.session_id is None:
            self.session_id = event.session_id
        if isinstance(event, ev.Done) and event.stop_reason != "paused":
            self.finished = True
        return event
