"""Processes a tool starts, in a process group of their own, stopped with the call.

`Group` is one process started in a new session (so its own process group: pgid == pid) and
how to stop all of it: SIGTERM to the group, up to `grace` seconds for it to exit, SIGKILL to
whatever is left, and the leader reaped. The shell tool runs its commands in one
(`shell._Command`); `process_group` gives any async tool the same:

    @tool
    async def build(target: str, ctx: ToolContext) -> str:
        async with ctx.subprocess("make", target, stdout=PIPE, stderr=STDOUT) as proc:
            out, _ = await proc.communicate()
        return out.decode()

When the block ends (the tool returns or raises), or the call is cancelled (the run's cancel, a
timeout, the run's lease lost), the group is stopped before the call's result is given: its
processes and every process they started are gone, except one that left the group on purpose
(`setsid`, a daemon) — containing those is a sandbox's job (docs/shell.md). A process a tool
starts itself (plain `subprocess`, `asyncio.create_subprocess_exec`) is not stopped: a thread
cannot be, and the runtime does not know of it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

log = logging.getLogger("loopwright.tools")

PIPES_HELD = 2.0
"""Seconds a stopped group's pipes may stay open (held by a process that left it) before its
block ends anyway."""
_STOPPING: set[asyncio.Future[None]] = set()  # stops that outlive their call (cancelled twice)


class Group:
    """A process that leads a process group of its own (started with `start_new_session`)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.exited = asyncio.ensure_future(proc.wait())
        self._stopping: asyncio.Future[None] | None = None

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the whole group (nothing happens when it is empty). A pid is not reused
        while a process group carries its number, so after the leader is reaped this still
        reaches only its group; only once the group is empty could the number, in theory, go to
        a new process that made itself a group leader in between."""
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace: float) -> asyncio.Future[None]:
        """Stop the group (once, however often it is asked): see `_stop`."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop(grace))
            _STOPPING.add(self._stopping)
            self._stopping.add_done_callback(_STOPPING.discard)
        return self._stopping

    async def _stop(self, grace: float) -> None:
        """SIGTERM the group, wait up to `grace` for it to be done (`_done_waits`), SIGKILL
        whatever is left, reap the leader (`_after_kill`), then `_stopped`."""
        try:
            self.signal(signal.SIGTERM)
            await asyncio.wait(self._done_waits(), timeout=grace)
            self.signal(signal.SIGKILL)
            await self._after_kill(grace)
        finally:
            self._stopped()

    def _done_waits(self) -> list[asyncio.Future[Any]]:
        return [self.exited]

    async def _after_kill(self, grace: float) -> None:
        """asyncio's `Process.wait()` also waits for the pipes it made to close: a process
        that left the group may hold them open, so the wait is bounded (the leader is dead)."""
        await asyncio.wait([self.exited], timeout=PIPES_HELD)
        if not self.exited.done():
            what = "process %d: its pipes are held open by a process that left its group"
            log.warning(what, self.proc.pid)

    def _stopped(self) -> None:
        pass

    def kill(self) -> None:
        """No more grace: SIGKILL the group now, unless stopping is already over."""
        if self._stopping is None or not self._stopping.done():
            self.signal(signal.SIGKILL)


async def stop(group: Group, grace: float) -> None:
    """Stop `group`, even when the caller is cancelled meanwhile: a second cancellation ends the
    grace at once (SIGKILL), then the cancellation goes on."""
    try:
        await asyncio.shield(group.stop(grace))
    finally:
        group.kill()  # only does something when a cancellation cut the grace short


@asynccontextmanager
async def process_group(
    program: str, *args: str, grace: float = 2.0, **options: Any
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`asyncio.create_subprocess_exec(program, *args, **options)` in a process group of its
    own, stopped (SIGTERM, SIGKILL after `grace` seconds) when the block ends or is cancelled
    (see the module)."""
    if grace < 0:
        raise ValueError("grace must be at least 0")
    proc = await asyncio.create_subprocess_exec(program, *args, start_new_session=True, **options)
    group = Group(proc)
    try:
        yield proc
    finally:
        await stop(group, grace)
