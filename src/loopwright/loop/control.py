"""What reaches a run from outside while it runs: the session's queues and the stop signals of
its calls in flight. The session owns one; the run's steps read it and the driver cancels it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .threads import Signal


@dataclass(slots=True)
class Control:
    """What reaches a run from outside: steering and follow-up queues, and the stop signals of
    its calls in flight (`ToolContext.cancelled`)."""

    # (lists: an empty deque takes 760 bytes, a block of 64 slots; an empty list 56)
    steering: list[str] = field(default_factory=list)
    follow_ups: list[str] = field(default_factory=list)
    signals: set[Signal] = field(default_factory=set)

    def cancel(self) -> bool:
        """Drop what is queued (True if anything was) and tell the calls in flight, at once: a
        thread cannot be cancelled, and a job still waiting for a thread must never start."""
        dropped = bool(self.steering or self.follow_ups)
        self.steering.clear()
        self.follow_ups.clear()
        for signal in self.signals:
            signal.set()
        return dropped
