"""What a journal commits, and when: the events never stored, the commit points, the settings
a runtime's journals write with, and the crash points tests set (`LOOPWRIGHT_CRASH_AFTER`)."""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..loop.observers import Observer
from ..toolsets import Toolsets

NOT_STORED = frozenset({"text:delta", "thinking:delta", "tool:delta"})
COMMIT_AT = frozenset(
    {
        "input:received",
        "steering:injected",
        "message:completed",
        "pending:requested",  # with its item's announcement: seen (and decided) once both are in
        "tool:started",
        "tool:result",
        "tool:late_result",
        "run:interrupted",
        "compaction:finished",
        "done",  # with the terminal event just before it: nothing runs between the two
    }
)
FORWARDED_AT = frozenset({"approval:pending", "question:pending"})
"""A subagent's events its parent's log commits at: the items a human answers, so the parent's
log holds one before its stream shows it (with its seq) and before anyone decides it; what
follows a decision in that log never repeats it."""


def commits(event: ev.Event) -> bool:
    """Whether a journal commits once it has appended `event` (a commit point)."""
    if isinstance(event, ev.SubagentEvent):
        return forwarded(event).type in FORWARDED_AT
    return event.type in COMMIT_AT


def forwarded(event: ev.SubagentEvent) -> ev.Event:
    """The subagent's own event `event` forwards (a grandchild's is forwarded twice)."""
    inner = event.event
    while isinstance(inner, ev.SubagentEvent):
        inner = inner.event
    return inner


CRASH_ENV = "LOOPWRIGHT_CRASH_AFTER"
"""Tests only: `type[#n][,…]` kills the process right after the n-th commit holding that type
(counted over every journal of the process: a subagent's commits count with its parent's)."""
LEASE_ENV = "LOOPWRIGHT_LEASE_SECONDS"
"""Tests only: overrides the length of every lease the store records (a process about to be
killed leaves one that expires at once); a run's own deadline stays its `ttl`."""


def new_owner() -> str:
    """A writer's name in leases: the host, the process and a random part (two runtimes of one
    process are two owners)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How a runtime's journals write."""

    owner: str = field(default_factory=new_owner)
    ttl: float = 30.0
    """Seconds a lease lasts unless renewed; the heartbeat renews it every third of that. A run
    past that since its last claim or renewal was sent takes its lease for lost (`lease`)."""
    partial_every: float = 0.5
    snapshot_every: int = 200
    """Events appended since the newest snapshot past which a run's end saves another."""
    environment: str | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """How the heartbeat waits (tests inject a clock)."""
    clock: Callable[[], float] = time.monotonic
    """What a lease's deadline is read with (seconds; tests inject a clock)."""
    observers: tuple[Observer, ...] | None = None
    """What sees every event of the sessions' runs (None: the process's default as each session
    is made; a `Runtime` reads it as it is made)."""
    toolsets: Toolsets = field(default_factory=Toolsets)
    """The owner of the live toolsets the sessions' runs enter (the runtime's: exited as it
    closes)."""

    def of_sessions(self) -> dict[str, Any]:
        """What the runtime's sessions are made with, besides their key and journal."""
        return {
            "environment": self.environment,
            "observers": self.observers,
            "toolsets": self.toolsets,
        }

    @property
    def lease_seconds(self) -> float:
        override = os.environ.get(LEASE_ENV)
        return float(override) if override else self.ttl


@functools.cache
def crash_points_of_process() -> dict[str, int]:
    """The counts left before each crash point, one for all the process's journals."""
    return _crash_points(os.environ.get(CRASH_ENV, ""))


def _crash_points(spec: str) -> dict[str, int]:
    points = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, count = part.partition("#")
        points[kind] = int(count or 1)
    return points


def maybe_crash(points: dict[str, int], events: Sequence[ev.Event]) -> None:
    for event in events:
        crash_after(event.type, points)


def crash_after(kind: str, points: dict[str, int] | None = None) -> None:
    """A commit of `kind` (`pending:decided`: a decision, which the log commits itself) was
    made: a crash point of the process's (`CRASH_ENV`) kills it now when its count is up."""
    points = crash_points_of_process() if points is None else points
    if kind in points:
        points[kind] -= 1
        if points[kind] == 0:
            os._exit(86)
