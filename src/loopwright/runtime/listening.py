"""A run's listener for the controls other processes send it.

A run that lives past `LISTEN_AFTER` listens for the controls other processes send it
(`EventLog.controls`: a cancel, a steer, a follow-up) and applies each exactly as a control of
this process (`LiveRun.apply`): a cancel cancels the run, a steer or a follow-up is queued
(logged as `steering:queued`, injected as `steering:injected`). A control sent earlier waits in
the log until then (it is addressed to the run's lease, so it cannot miss it); a short run never
pays for listening. The listener ends when the run releases its lease (`Listeners.ending`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ..store import StaleWriter, StoreError
from ..store.log import Controls, Lease, QueuedControl

logger = logging.getLogger("loopwright.runtime")

LISTEN_AFTER = 0.2
"""Seconds a run lives before it listens for controls (see the module docstring): a one-step
run of a few milliseconds on SQLite took ~20% longer when every run listened from its start
(the listener's reads at its start and end, on the log's one worker), measured."""
LISTENER_GRACE = 5.0
"""Seconds a run's listener for controls may take to end after the run (a release here ends it
at once; a run that lost its lease leaves it waiting): then it is cancelled."""
RETRY = 1.0
"""Seconds before a listener whose log failed listens again."""


class Listened(Protocol):
    """The run a listener listens for (a `live.LiveRun`)."""

    @property
    def finished(self) -> asyncio.Event: ...

    def apply(self, control: QueuedControl) -> None: ...


class Listener:
    """Listens, in a task of its own, for the controls sent to `run`, which holds `lease`, and
    has it apply each, until the lease ends (or the run has finished and its log fails)."""

    def __init__(self, log: Controls, lease: Lease, run: Listened) -> None:
        self._listening = asyncio.Event()  # (not on `self`: the task, ended, keeps no cycle)
        self.task = asyncio.get_running_loop().create_task(
            _listen(log, lease, run, self._listening), name=f"loopwright controls {lease.key.id}"
        )

    @property
    def listening(self) -> bool:
        """It waited `LISTEN_AFTER` and listens (or has listened)."""
        return self._listening.is_set()


async def _listen(log: Controls, lease: Lease, run: Listened, listening: asyncio.Event) -> None:
    await asyncio.sleep(LISTEN_AFTER)
    listening.set()
    while not run.finished.is_set():
        try:
            async for control in log.controls(lease):
                run.apply(control)
        except StaleWriter:
            return  # released (or taken over): the run is over
        except StoreError as exc:
            if run.finished.is_set():
                return
            logger.warning("session %s: controls not heard: %s", lease.key.id, exc)
            await asyncio.sleep(RETRY)


class Listeners:
    """The listeners of this process's runs that ended, still ending."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def ending(self, listener: Listener | None) -> None:
        """A run ended: its listener is cancelled when it had not begun to listen (nothing to
        lose); else it ends once its release is seen (at once when released here), or is
        cancelled after `LISTENER_GRACE`."""
        if listener is None:
            return
        task = listener.task
        if not listener.listening:
            task.cancel()
        if task.done():
            return
        self._tasks.add(task)
        late = asyncio.get_running_loop().call_later(LISTENER_GRACE, task.cancel)

        def ended(_: object) -> None:
            late.cancel()
            self._tasks.discard(task)

        task.add_done_callback(ended)

    async def stop(self) -> None:
        """Cancel the listeners of runs that ended and have not seen their release yet."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
