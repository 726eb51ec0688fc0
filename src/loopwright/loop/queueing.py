"""What a session queues for its runs: steering (delivered at the next step boundary) and
follow-ups (delivered when the run would otherwise stop), sent from anywhere while it runs.

The queue is the session's state's (`SessionState.queued`), and the reducer is its only writer:
queueing is applying `steering:queued` (logged by a durable session's running run, which
applies it as it logs it), clearing is applying `steering:cleared`, and a step delivers a
message by yielding its `steering:injected`. `Queueing` is the part of `session.Session` that
does it; `Queued` is what `Session.queued` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from .. import events as ev
from ..errors import SessionBusy
from ..messages import CustomMessage
from ..state.replay import apply
from ..state.session_state import SessionState


@dataclass(frozen=True, slots=True)
class Queued:
    """Steering and follow-up messages sent to a session and not yet delivered, oldest first."""

    steering: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.steering) + len(self.follow_ups)


class Recorder(Protocol):
    """The part of a session's journal that logs what is sent to its run (`session.Journal`)."""

    def record(self, event: ev.Event, *, between_runs: bool = False) -> bool: ...


class SteeredRun(Protocol):
    """What queueing asks of a session's run (`driver.Run`)."""

    @property
    def cancelled(self) -> bool: ...

    @property
    def finished(self) -> bool: ...


class Queueing:
    """A session's steering and follow-ups (the base of `session.Session`, which holds the
    fields named here)."""

    id: str
    state: SessionState
    journal: Recorder | None
    _run: SteeredRun | None
    _unlogged: list[ev.SteeringQueued]
    """What was queued while no run held a durable session (see `unlogged`)."""

    @property
    def busy(self) -> bool:
        """A run of the session is in progress (its task has not ended)."""
        return self._run is not None and not self._run.finished

    def steer(self, message: str) -> None:
        """Deliver `message` at the next step boundary of the running run (or the next run).
        A durable session's running run logs it at once, so a crash before its delivery does
        not lose it; while no run goes, it waits in this object for the next (`Runtime.steer`
        logs it at once either way). `SessionBusy` while a cancelled run is ending (the cancel
        drops what is queued), and while a durable run past its `done` lets its lease go."""
        self._queue(ev.SteeringQueued(text=message, mode="steer"))

    def follow_up(self, message: str) -> None:
        """Deliver `message` when the run would otherwise stop (logged like `steer`)."""
        self._queue(ev.SteeringQueued(text=message, mode="follow_up"))

    def _check_not_ending(self) -> None:
        run = self._run
        if run is not None and run.cancelled and not run.finished:
            raise SessionBusy(
                f"session {self.id}'s run was cancelled and is ending (a cancel drops what is "
                "queued): send the message again once it has ended"
            )

    def _queue(self, queued: ev.SteeringQueued) -> None:
        """Queue a message: the event applied to the state (`replay`, its queue's only writer),
        by the running run's journal as it logs it, or here (not logged)."""
        self._check_not_ending()
        journal = self.journal
        if journal is not None and self.busy:
            if journal.record(queued) is False:  # (taken: logged and applied)
                raise self._closing()
            return
        apply(self.state, queued)
        if journal is not None:
            self._unlogged.append(queued)

    def unlogged(self) -> list[ev.SteeringQueued]:
        """What `steer` and `follow_up` queued in a durable session while no run held it, still
        queued: not in its log until its next run delivers them, so a state read from the log
        again takes them on (`runtime.state.refill`)."""
        queued, kept = list(self.state.queued), []
        for event in self._unlogged:
            if (event.mode, event.text) in queued:
                queued.remove((event.mode, event.text))
                kept.append(event)
        self._unlogged = kept
        return kept

    async def add(self, message: CustomMessage) -> ev.MessageCustom:
        """Put the app's custom message in the history between runs (`message:custom`, applied
        here; a durable session logs it under a claim of its own and waits until it is
        committed, or failed to be: logged). `SessionBusy` while a run goes (add it once the
        run has ended: `await session.idle()`)."""
        if self.busy:
            raise SessionBusy(
                f"session {self.id} has a run in progress: a custom message joins the history "
                "between runs (`await session.idle()` first)"
            )
        event = ev.MessageCustom(message=message)
        journal = self.journal
        if journal is not None:
            if not journal.record(event, between_runs=True):  # (another writer took the log)
                raise SessionBusy(f"session {self.id}'s log is another process's now: reopen it")
            flushed = getattr(journal, "flushed", None)  # (the runtime's journal: `flushed`)
            if flushed is not None:
                await flushed()
        apply(self.state, event)
        return event

    def _closing(self) -> SessionBusy:
        """(The run let its lease go: the log takes nothing more from it.)"""
        return SessionBusy(
            f"session {self.id}'s run has ended and is closing its log: try again once it has "
            "(`await session.idle()`)"
        )

    @property
    def queued(self) -> Queued:
        """What `steer` and `follow_up` sent that no run has delivered yet (a copy)."""
        return _split(self.state.queued)

    def clear_queue(self, mode: Literal["steer", "follow_up"] | None = None) -> Queued:
        """Drop the queued steering (`"steer"`), follow-ups (`"follow_up"`) or both (None), so
        that no run delivers them; returns what was dropped. A durable session logs it
        (`steering:cleared`) as it logs what was sent: its running run does (`SessionBusy` once
        it is closing its log); with none, under a claim of its own if the log holds any."""
        return self._clear(mode, through_run=self.busy)

    def _clear(self, mode: Literal["steer", "follow_up"] | None, *, through_run: bool) -> Queued:
        queued = self.state.queued
        cleared = _split([entry for entry in queued if mode is None or entry[0] == mode])
        event = ev.SteeringCleared(mode=mode)
        # (what the log may hold: what a run logged, or what was logged for the next run)
        logged = cleared if through_run else len(queued) > len(self.unlogged())
        if self.journal is not None and logged:
            taken = self.journal.record(event, between_runs=not through_run)
            if through_run and not taken:
                raise self._closing()
        apply(self.state, event)  # (again, if the run's journal took it: no change)
        return cleared


def _split(queued: list[tuple[Literal["steer", "follow_up"], str]]) -> Queued:
    steering = tuple(text for mode, text in queued if mode == "steer")
    return Queued(steering, tuple(text for mode, text in queued if mode == "follow_up"))
