"""The crash model checker's machinery (issue 30, point 5): processes that can be stopped at any
write to the store, deterministically.

A *process* here is one `Runtime` on a log of its own (its own SQLite connection or PostgreSQL
pool on the test's database), wrapped in `Faulty`: a proxy that counts every write the process
makes to the store — claim, renew, release, append, decide, save_snapshot, send_control,
withdraw, a control taken, the outbox's expand, claim, record, prune — and can stop the process
just *before* a write n or just *after* it committed (before its caller sees the result). A
stop is one of two kinds:

- **crash**: the process is dead. From then on every call it makes to the store, and every tool
  it would run, waits for ever: no `finally` of it reaches the log, as no cleanup runs in a
  killed process. Its tasks are abandoned (cancelled only when the case is over, when the store
  refuses them anything).
- **freeze**: the process stalls (a long GC pause, a stopped VM): the same, until the checker
  lets it go on after another process took its sessions over; then its writes reach the
  store, which must refuse them (fencing), and its tools run their late effects.

Every run is deterministic (scripted models, tools that are coroutines, heartbeats that never
beat, no timers, one write of a process at a time), so a scenario run once without a stop lists
its writes, and a stop at write n replays the same n-1 writes first. (A process makes its writes
one at a time — a listener's wait for a control aside — so that a stop leaves none of them in
flight: a subagent's commit racing its parent's on the store's worker threads would otherwise
land before or after the stop as the threads went, and the case would not be the same twice.) A *boundary* is a distinct state a stop can leave: (writes
committed, tool effects, acknowledged client calls); stopping before write n+1 differs from
stopping after write n only when a tool ran or a call returned between the two, and is checked
then. Each boundary is named by the scenario step that was in progress, the write's method and
its ordinal in that step (`resolve:decide#1`), so that a window found here is named by where it
is, not by a number that moves when the code changes.

Tools record every real execution in the case's `Ledger` (and every client call that returned,
every webhook delivery): the ledger is what really happened, the log is what the store says.
The checks over the two are in `crash_checks.py`; the scenarios in `crash_scenarios.py`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from loopwright.store import StaleWriter

WRITES = frozenset(
    {"claim", "renew", "release", "append", "decide", "save_snapshot", "send_control", "withdraw"}
)
OUTBOX_WRITES = frozenset({"expand", "claim", "record", "prune", "key"})
FENCED = frozenset({"renew", "release", "append", "save_snapshot"})
"""Writes under a lease: a process that lost its lease must have each of them refused."""

When = Literal["before", "after"]
Kind = Literal["crash", "freeze"]


class Buried(BaseException):
    """What a dead process's call to the store raises once the case is over (never caught by
    the code under test's `except Exception`)."""


CURRENT: contextvars.ContextVar[Process] = contextvars.ContextVar("crash_model_process")
"""The process a task belongs to (tasks inherit it from the task that made them)."""


@dataclass(frozen=True)
class Fault:
    """Stop the process `when` its `n`-th write (counted from 1), as a `kind`."""

    n: int
    when: When
    kind: Kind


@dataclass
class Write:
    """One write a process made, as the trace keeps it."""

    n: int
    method: str
    step: str
    ordinal: int
    """Its number among the writes of that method in that step (from 1)."""
    state_before: tuple[int, int]
    """(ledger entries, acknowledgements) just before it was attempted."""
    state_after: tuple[int, int] | None = None
    outcome: str = "pending"
    """`ok`, or the exception's type name (a refused write: `StaleWriter`)."""

    def name(self, when: When) -> str:
        return f"{self.step}:{self.method}#{self.ordinal}:{when}"


@dataclass
class Ledger:
    """What really happened in a case, in order: `(process, what)` entries."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)
    """The client calls that returned, as `step` names (P1 holds the log to them)."""
    booked: dict[str, str] = field(default_factory=dict)
    """A bank's table outside the session log: idempotency key -> the charge it booked for it
    (`pay`: an effect attempted again with a key already booked books nothing)."""

    def state(self) -> tuple[int, int]:
        return len(self.entries), len(self.acks)

    def ran(self, call_id: str) -> int:
        return sum(1 for _, what in self.entries if what == f"tool {call_id}")


class Process:
    """A process: its name, its log (`Faulty`), and whether it may go on."""

    def __init__(self, name: str, ledger: Ledger, fault: Fault | None = None) -> None:
        self.name, self.ledger, self.fault = name, ledger, fault
        self.running = asyncio.Event()
        self.running.set()
        self.stopped = asyncio.Event()
        """Set when the fault hit."""
        self.buried = False
        self.step = "start"
        self.writes: list[Write] = []
        self.ordinals: dict[tuple[str, str], int] = {}
        self.thawed_at: int | None = None
        self.writing = asyncio.Lock()
        """The number of writes made when a frozen process was let go on."""

    async def alive(self) -> None:
        """Return while the process may run; wait while it is stopped (for ever, if dead)."""
        while not self.running.is_set():
            if self.buried:
                raise Buried
            await self.running.wait()
        if self.buried:
            raise Buried

    def stop(self) -> None:
        self.running.clear()
        self.stopped.set()

    def thaw(self) -> None:
        fault = self.fault
        assert fault is not None
        self.thawed_at = fault.n - 1 if fault.when == "before" else fault.n
        self.running.set()

    def bury(self) -> None:
        self.buried = True
        self.running.set()  # (wakes the waiters: each raises `Buried`)

    async def write(self, method: str, call: Callable[[], Awaitable[Any]]) -> Any:
        if method == "controls":  # (a listener's wait for the next control: it may be long)
            return await self._write(method, call)
        async with self.writing:  # one write at a time: a stop leaves none of its in flight
            return await self._write(method, call)

    async def _write(self, method: str, call: Callable[[], Awaitable[Any]]) -> Any:
        await self.alive()
        ordinal = self.ordinals.get((self.step, method), 0) + 1
        self.ordinals[(self.step, method)] = ordinal
        write = Write(len(self.writes) + 1, method, self.step, ordinal, self.ledger.state())
        self.writes.append(write)
        hit = self.fault is not None and self.fault.n == write.n
        if hit and self.fault is not None and self.fault.when == "before":
            self.stop()
            await self.alive()
        try:
            result = await call()
        except BaseException as exc:
            write.outcome = type(exc).__name__
            raise
        write.outcome = "ok"
        if hit and self.fault is not None and self.fault.when == "after":
            self.stop()
            await self.alive()
        write.state_after = self.ledger.state()
        return result

    def refused_late(self) -> list[Write]:
        """Writes under a lease this process made after it was let go on that the store took
        (fencing should have refused every one)."""
        if self.thawed_at is None:
            return []
        taken = []
        for write in self.writes[self.thawed_at :]:
            if write.method == "claim" and write.outcome == "ok":
                break  # (a lease of its own, after the takeover: its writes are its right)
            if write.method in FENCED and write.outcome == "ok":
                taken.append(write)
        return taken

    def claimed_late(self) -> bool:
        """Whether this process, let go on, claimed a session anew (its writes are then legit)."""
        late = self.writes[self.thawed_at or 0 :] if self.thawed_at is not None else []
        return any(w.method == "claim" and w.outcome == "ok" for w in late)

    async def tool(self, call_id: str) -> None:
        """A tool's side effect, in the process it runs in."""
        await self.alive()
        self.ledger.entries.append((self.name, f"tool {call_id}"))


def here() -> Process:
    return CURRENT.get()


class Faulty:
    """An `EventLog` (or an outbox) whose every call goes through a `Process`."""

    def __init__(self, inner: Any, process: Process, writes: frozenset[str] = WRITES) -> None:
        self._inner, self._process, self._writes = inner, process, writes

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value) or name.startswith("_") or name == "close":
            return value
        process = self._process
        if name in ("controls", "follow"):
            return lambda *a, **k: self._iterate(name, value(*a, **k))
        if name in self._writes:

            async def write(*args: Any, **kwargs: Any) -> Any:
                return await process.write(name, lambda: value(*args, **kwargs))

            return write

        async def read(*args: Any, **kwargs: Any) -> Any:
            await process.alive()
            result = await value(*args, **kwargs)
            await process.alive()
            return result

        return read

    async def _iterate(self, name: str, inner: AsyncIterator[Any]) -> AsyncIterator[Any]:
        process = self._process
        try:
            while True:
                await process.alive()
                try:
                    item = (
                        await process.write(name, inner.__anext__)
                        if name == "controls"
                        else (await inner.__anext__())
                    )
                except StopAsyncIteration:
                    return
                await process.alive()
                yield item
        finally:
            await inner.aclose()  # type: ignore[attr-defined]


async def never(seconds: float) -> None:
    """A heartbeat that never beats (leases are judged by the clocks the logs are given)."""
    await asyncio.Event().wait()


async def bury(process: Process, tasks: set[asyncio.Task[Any]]) -> None:
    """End a dead process's tasks: each wakes to `Buried` (or a cancel) and ends."""
    process.bury()
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=10)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # (retrieved: a dead process's tasks end so)


async def first_of(work: Awaitable[Any], process: Process) -> bool:
    """Run `work` until it ends (True) or `process` was stopped (False)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(process.stopped.wait())
    await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        stopped.cancel()
        task.result()  # (a failure of the scenario itself is the test's)
        return True
    return False


def boundaries(writes: list[Write], kinds: tuple[Kind, ...]) -> list[tuple[Fault, str]]:
    """Every distinct state a stop can leave in a run that made `writes`, once per kind: after
    each write, and before one when a tool ran or a call returned since the write before it."""
    out: list[tuple[Fault, str]] = []
    previous: tuple[int, int] | None = None
    for write in writes:
        if write.state_before != previous:
            out += [(Fault(write.n, "before", k), write.name("before")) for k in kinds]
        out += [(Fault(write.n, "after", k), write.name("after")) for k in kinds]
        previous = write.state_after
    return out


def is_stale(exc: BaseException) -> bool:
    return isinstance(exc, StaleWriter)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The crash model checker's count (tests/conftest.py imports this hook)."""
    scenarios, total, windows = 0, 0, {}
    for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
        for name, value in getattr(report, "user_properties", []):
            if name == "crash_model" and report.when == "call":
                scenarios += 1
                total += value["boundaries"]
                for window, where in value["windows"].items():
                    windows[window] = windows.get(window, 0) + len(where)
    if scenarios:
        terminalreporter.write_line(
            f"crash model: {scenarios} scenario runs, {total} boundaries checked; windows: "
            + (", ".join(f"{w} ({n} boundaries)" for w, n in sorted(windows.items())) or "none")
        )
