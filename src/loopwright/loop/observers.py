"""Observers of runs: what sees every event of a run as it passes the run's task, without the
loop knowing of it (`loopwright.telemetry` makes one that traces runs).

Observers belong to whoever runs sessions: a `Session` is given them as it is made
(`Session(agent, observers=...)`), a `Runtime` likewise for every session it drives, and a
session's subagents get their parent's. Given none, a session or a runtime takes the process's
default as it is made: `telemetry.observers()`, the tracer while tracing is on.

An observer sees a run and its session through `ObservedRun` and `ObservedSession`: what it may
read of them (a `Run` and a `Session` are both), defined here so that an observer (and this
module) needs neither the driver nor the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from .. import events as ev
    from ..agent import Agent
    from ..state.history import History
    from ..state.session_state import SessionState


class ObservedRun(Protocol):
    """What an observer reads of a run (a `loop.driver.Run`)."""

    @property
    def session_id(self) -> str: ...


class ObservedSession(Protocol):
    """What an observer, and the run driving it, read of a session (a `loop.session.Session`)."""

    @property
    def agent(self) -> Agent: ...

    @property
    def tenant(self) -> str: ...

    @property
    def environment(self) -> str: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def history(self) -> History: ...


Observer: TypeAlias = (
    "Callable[[ObservedRun, ObservedSession | None], Callable[[ev.Event | None], object]]"
)
"""Called as a run's task starts; what it returns is called with each event of the run in that
task, as the event is applied, and with None once the task ends (with or without its `done`)."""


def observing(
    observers: tuple[Observer, ...], run: ObservedRun, session: ObservedSession | None
) -> Callable[[ev.Event | None], object]:
    """What a run's task calls with each event: its one observer's, or each of them in turn."""
    each = [observer(run, session) for observer in observers]
    if len(each) == 1:
        return each[0]
    return lambda event: [observe(event) for observe in each]
