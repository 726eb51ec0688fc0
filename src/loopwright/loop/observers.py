"""Observers of runs: what sees every event of a run as it passes the run's task, without the
loop knowing of it (`loopwright.telemetry` makes one that traces runs).

Observers belong to whoever runs sessions: a `Session` is given them as it is made
(`Session(agent, observers=...)`), a `Runtime` likewise for every session it drives, and a
session's subagents get their parent's. Given none, a session or a runtime takes the process's
default as it is made: `telemetry.observers()`, the tracer while tracing is on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from .. import events as ev
    from .driver import Run
    from .session import Session

Observer: TypeAlias = "Callable[[Run, Session | None], Callable[[ev.Event | None], object]]"
"""Called as a run's task starts; what it returns is called with each event of the run in that
task, as the event is applied, and with None once the task ends (with or without its `done`)."""


def observing(
    observers: tuple[Observer, ...], run: Run, session: Session | None
) -> Callable[[ev.Event | None], object]:
    """What a run's task calls with each event: its one observer's, or each of them in turn."""
    each = [observer(run, session) for observer in observers]
    if len(each) == 1:
        return each[0]
    return lambda event: [observe(event) for observe in each]
