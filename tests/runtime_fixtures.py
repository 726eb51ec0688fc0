"""What the runtime tests share: a real SQLite log file per test (several `SQLiteLog`s on it are
several processes in effect), an injected clock for leases, a heartbeat the test ticks, a model
reply the test holds, and agents whose `pay` tool asks a human."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import call, scripted, verify
from loopwright import Agent, Rules, tool
from loopwright import events as ev
from loopwright.runtime import LiveRun, Runtime
from loopwright.store.log import EventLog, SessionKey, Store
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.testing import FunctionModel, Reply

__all__ = ["logs", "pg_logs", "runtimes"]  # the fixtures; import the rest by name

RULES = Rules.from_yaml(
    "rules: [{name: ask-pay, tool: pay, decision: ask}]\ndefault_decision: allow"
)
paid: list[int] = []


@tool
def pay(n: int) -> str:
    """Pay."""
    paid.append(n)
    return f"paid {n}"


@tool
def look(n: int) -> str:
    """Look."""
    return f"looked {n}"


def payer(*replies: Any, name: str = "payer", **kw: Any) -> Agent:
    """An agent whose `pay` calls ask a human (the replies are scripted)."""
    paid.clear()
    return Agent(name=name, model=scripted(*replies), tools=[pay, look], rules=RULES, **kw)


def pays(n: int = 1, then: str = "all paid") -> tuple[dict[str, Any], str]:
    """A reply that calls `pay`, then a final text."""
    return {"tool_calls": [call("pay", "p1", n=n)]}, then


class Clock:
    """The log's clock (Unix seconds); it moves only when told."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Beats:
    """A heartbeat's sleep that ends when the test says: `beat()` lets one renewal happen;
    `asleep` is set while the heartbeat waits for the next one."""

    def __init__(self) -> None:
        self.asleep = asyncio.Event()
        self._wake: asyncio.Future[None] | None = None

    async def sleep(self, seconds: float) -> None:
        self._wake = asyncio.get_running_loop().create_future()
        self.asleep.set()
        await self._wake

    async def beat(self) -> None:
        await self.asleep.wait()
        assert self._wake is not None
        self.asleep.clear()
        self._wake.set_result(None)


async def never(seconds: float) -> None:
    """A heartbeat that never beats: its process is as good as dead."""
    await asyncio.Event().wait()


class Held:
    """A model whose replies the test hands over one at a time (`give`), knowing when the
    model is waiting for one (`asked`)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.replies: asyncio.Queue[Any] = asyncio.Queue()
        self.model = FunctionModel(self._reply)

    async def _reply(self, request: Any) -> Any:
        self.asked.set()
        try:
            return await self.replies.get()
        finally:
            self.asked.clear()

    def give(self, reply: Any) -> None:
        """A reply: text, or a script entry (`{"tool_calls": [...]}`)."""
        self.replies.put_nowait(Reply.parse(reply))


@pytest.fixture
async def logs(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    """`await logs(clock=None)`: one more `SQLiteLog` on the test's file."""
    opened: list[SQLiteLog] = []

    async def make(clock: Callable[[], float] | None = None) -> Store:
        log = SQLiteLog(tmp_path / "loopwright.db", **({"clock": clock} if clock else {}))
        opened.append(log)
        return log

    yield make
    for log in opened:
        await log.close()


@pytest.fixture
async def pg_logs(pg_url: str) -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    """`await pg_logs(clock=None, **options)`: one more `PostgresLog` on the test's schema (the
    database's clock unless given one)."""
    from loopwright.store.pg_log import PostgresLog

    opened: list[PostgresLog] = []

    async def make(clock: Callable[[], float] | None = None, **options: Any) -> Store:
        log = await PostgresLog(pg_url, clock=clock, **options).open()
        opened.append(log)
        return log

    yield make
    for log in opened:
        await log.close()


@pytest.fixture
async def runtimes() -> AsyncIterator[Callable[..., Runtime]]:
    """`runtimes(agents, log, **options)`: a `Runtime`, closed after the test."""
    made: list[Runtime] = []

    def make(agents: dict[str, Agent], log: Store, **options: Any) -> Runtime:
        runtime = Runtime(agents, log, **options)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()


async def ended(live: LiveRun) -> ev.Done:
    """The run's `done`, once it ended; its whole stream passes the suite's checks."""
    done = await live.wait()
    assert done is not None, live.failure
    verify(live.items)
    return done


async def until(stream: AsyncIterator[Any], kind: str) -> list[Any]:
    """Read (seq, event) pairs up to and including the first event of type `kind`."""
    seen = []
    async for item in stream:
        seen.append(item)
        if item[1].type == kind:
            return seen
    raise AssertionError(f"the stream ended before {kind}: {[e.type for _, e in seen]}")


def kinds(items: list[Any]) -> list[str]:
    """The types of (seq, event) pairs, token deltas left out."""
    return [e.type for _, e in items if not e.type.endswith(":delta")]


async def logged(log: EventLog, key: SessionKey, after: int = 0) -> list[str]:
    return [s.event.type for s in await log.read(key, after=after)]


KEY = SessionKey("acme", "payer", "s1")


@contextlib.contextmanager
def releases_held(log: EventLog) -> Iterator[tuple[asyncio.Event, asyncio.Event]]:
    """`(releasing, go_on)`: the log's lease releases wait until `go_on` is set (`releasing`
    is set as one begins), so a test acts while a run lets its session go; restored on exit."""
    releasing, go_on, release = asyncio.Event(), asyncio.Event(), log.release

    async def held(lease: Any, status: Any) -> None:
        releasing.set()
        await go_on.wait()
        await release(lease, status)

    log.release = held  # type: ignore[method-assign]
    try:
        yield releasing, go_on
    finally:
        go_on.set()
        log.release = release  # type: ignore[method-assign]
