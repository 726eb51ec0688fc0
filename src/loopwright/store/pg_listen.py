"""Live fan-out for the PostgreSQL event log: one listening connection per log and channel (its
events', its controls'), opened once someone waits, shared by every waiter of the process.

Every commit that appends events to a session is followed by a NOTIFY on the log's channel with
a small payload, the session's key and its last seq ("17 342"); the events themselves are read
from the table. A control sent to the session's run is told as "17 c", and one taken by that run
as "17 t", on a channel of their own (`channel(schema, "controls")`, heard by a `Wakeups` of its
own): each wakes only its own waiters (`CONTROL`, `TAKEN`), and a process whose runs listen for
controls does not hear every commit. A waiter takes its session's next wake-up (`tick`)
*before* it reads, so a commit either is in what it reads or wakes it after. Wake-ups are only
hints to read again:

- a notification wakes the waiters of its session; this process's own commits wake them at once;
- the listening connection, once lost, is opened again (with a growing pause); every waiter is
  woken when it is lost and again once it listens again, and re-reads from its last seq;
- a waiter also re-reads every `recheck` seconds, whatever it heard: a notification lost on a
  connection that looks alive (cut off without a word), or never sent (its writer died between
  its commit and its notification), delays an event, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib

import psycopg
from psycopg import sql

EVENTS, CONTROL, TAKEN = "", "c", "t"
"""What a wake-up is about: appended events, a control sent, a control taken or withdrawn."""


class Wakeups:
    """Waiters by session key, woken by notifications on `channel` (see the module docstring)."""

    def __init__(self, conninfo: str, channel: str, *, recheck: float) -> None:
        self.conninfo, self.channel, self.recheck = conninfo, channel, recheck
        self._ticks: dict[tuple[int, str], asyncio.Future[None]] = {}
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connections = 0
        """How many times the listening connection was opened."""
        self.pid: int | None = None
        """The listening connection's server process, while it listens."""
        self.sleep = asyncio.sleep
        """The pause before listening again (a test holds it)."""

    async def start(self) -> None:
        """Listen from now on (once per log), waiting until the first LISTEN is in place — or
        `recheck` seconds, after which waiters read on their own until it is."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())
        if not self._listening.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._listening.wait()), self.recheck)

    def tick(self, sid: int, about: str = EVENTS) -> asyncio.Future[None]:
        """Completes at the session's next commit of what `about` names (or any reason to
        read again)."""
        tick = self._ticks.get((sid, about))
        if tick is None or tick.done():
            tick = self._ticks[sid, about] = asyncio.get_running_loop().create_future()
        return tick

    async def wait(self, tick: asyncio.Future[None]) -> None:
        """Until `tick`, or `recheck` seconds; `tick` is shared, so a waiter cancelled leaves
        it be for the others."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(tick), self.recheck)

    def wake(self, sid: int, about: str = EVENTS) -> None:
        tick = self._ticks.pop((sid, about), None)
        if tick is not None and not tick.done():
            tick.set_result(None)

    def wake_all(self) -> None:
        ticks, self._ticks = self._ticks, {}
        for tick in ticks.values():
            if not tick.done():
                tick.set_result(None)

    async def _listen(self) -> None:
        pause = 0.05
        while True:
            try:
                # (keepalives: a connection cut off without a word is noticed in about 11 s)
                db = await psycopg.AsyncConnection.connect(
                    self.conninfo,
                    autocommit=True,
                    keepalives=1,
                    keepalives_idle=5,
                    keepalives_interval=2,
                    keepalives_count=3,
                )
                async with db:
                    await db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self.connections += 1
                    self.pid = db.info.backend_pid
                    self._listening.set()
                    self.wake_all()  # what was committed while nobody listened is read now
                    pause = 0.05
                    async for note in db.notifies():
                        self._heard(note.payload)
            except (psycopg.Error, OSError):
                pass  # the server went away or is not reachable (yet): listen again
            self._listening.clear()
            self.pid = None
            self.wake_all()
            await self.sleep(pause)
            pause = min(pause * 2, self.recheck)

    def _heard(self, payload: str) -> None:
        self.heard(payload)

    def heard(self, payload: str) -> None:
        """Wake the waiters a payload names (a notification's, or this process's own write's)."""
        sid, _, rest = payload.partition(" ")
        if not sid.isdigit():
            self.wake_all()
        elif rest in (CONTROL, TAKEN):
            self.wake(int(sid), rest)
        else:
            self.wake(int(sid))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.wake_all()


def channel(schema: str, what: str = "") -> str:
    """The log's NOTIFY channel for events (or `what`, e.g. "controls"): one per schema (a
    database may hold several logs)."""
    name = "loopwright" if schema == "public" else f"loopwright {schema}"
    name = f"{name} {what}" if what else name
    return name.encode()[:63].decode(errors="ignore")
