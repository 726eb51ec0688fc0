"""Sessions and runs: the Python way to drive the loop.

A `Session` is one conversation with one agent; it holds the history and runs one input at a
time. `session.run(text)` returns a `Run`: an async iterator of events that executes the loop in
its own task, so `steer`, `follow_up` and `cancel` work from anywhere while you iterate.
Closing the iterator early cancels the run. A `Journal` (the store seam) sees every event before
the loop goes on; `loopwright.store` implements it durably.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import events as ev
from .agent import Agent
from .approvals import Approver
from .errors import SessionBusy
from .hooks import RunInfo
from .loop import Control, run_loop
from .messages import History, Message
from .models import get_model


class Journal(Protocol):
    """Where a run's events go before the loop continues (the store's seam).

    `append` must make the event durable (or fail) before it returns; the loop is suspended
    until it does, so an intent is recorded before its tool runs.
    """

    async def append(self, session_id: str, event: ev.Event) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """How a run ended: the final text, the stop reason and every event, in order."""

    text: str
    stop_reason: ev.RunStopReason
    events: list[ev.Event]
    session_id: str

    @property
    def pending_ids(self) -> list[str]:
        return [p for e in self.events if isinstance(e, ev.LoopPaused) for p in e.pending_ids]


class Session:
    """One conversation with one agent; one run at a time."""

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        tenant: str = "default",
        environment: str | None = None,
        history: History | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.agent = agent
        self.id = session_id or uuid.uuid4().hex
        self.tenant = tenant
        self.environment = environment or os.environ.get("LOOPWRIGHT_ENV", "production")
        self.history = history or History()
        self.journal = journal
        self._control = Control()
        self._run: Run | None = None
        self._gate = agent.gate()

    @property
    def messages(self) -> list[Message]:
        return self.history.messages

    @property
    def busy(self) -> bool:
        return self._run is not None and not self._run.finished

    def run(self, input: str | None = None, *, approver: Approver | None = None) -> Run:
        """Start processing `input`; iterate the returned `Run` for its events.

        `approver` answers `ask` decisions live; without one they become pending items and the
        run pauses. Raises `SessionBusy` while another run of this session is in progress.
        """
        if self.busy:
            raise SessionBusy(f"session {self.id} is already running")
        model = get_model(self.agent.model)
        info = RunInfo(
            session_id=self.id,
            tenant=self.tenant,
            environment=self.environment,
            agent=self.agent.name,
        )
        self._control.cancelled = False
        events = run_loop(
            self.agent,
            model,
            self._gate,
            self.history,
            info,
            self._control,
            input=input,
            approver=approver,
        )
        self._run = Run(events, self._control, self.id, self.journal)
        return self._run

    def steer(self, message: str) -> None:
        """Deliver `message` at the next step boundary of the running run (or the next run)."""
        self._control.steering.append(message)

    def follow_up(self, message: str) -> None:
        """Deliver `message` when the run would otherwise stop."""
        self._control.follow_ups.append(message)

    def cancel(self) -> None:
        """Cancel the running run: in-flight model request and tools are cancelled."""
        if self._run is not None:
            self._run.cancel()


_END = object()


@dataclass(eq=False)
class Run:
    """A run in progress: an async iterator of its events (use `async with` or iterate it to
    the end; leaving early cancels it)."""

    _events: AsyncIterator[ev.Event]
    _control: Control
    session_id: str
    _journal: Journal | None = None
    _queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    _task: asyncio.Task[None] | None = None
    _seen: list[ev.Event] = field(default_factory=list)
    finished: bool = False
    _terminal: bool = False
    _done: ev.Done | None = None

    def __aiter__(self) -> Run:
        return self

    async def __anext__(self) -> ev.Event:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drive())
        queue = self._queue
        item = queue.get_nowait() if queue.qsize() else await queue.get()
        if item is _END:
            self.finished = True
            await self._task
            raise StopAsyncIteration
        return item  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Stop listening; a run that has not finished is cancelled first."""
        if self._task is None:
            self.finished = True
            await self._events.aclose()  # type: ignore[attr-defined]
            return
        if not self._task.done():
            self.cancel()
            try:
                await asyncio.shield(self._task)
            except asyncio.CancelledError:
                self._task.cancel()
                raise
        self.finished = True

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def cancel(self) -> None:
        """Abort the run; it still ends with `loop:aborted` and `done`."""
        if self._terminal or self.finished:
            return
        self._control.cancelled = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def result(self) -> RunResult:
        """Drain the run and return how it ended."""
        async for _ in self:
            pass
        assert self._done is not None
        return RunResult(
            text=self._done.text,
            stop_reason=self._done.stop_reason,
            events=list(self._seen),
            session_id=self.session_id,
        )

    async def _drive(self) -> None:
        """Pump the loop's events through the journal into the queue."""
        events, journal, queue, seen = self._events, self._journal, self._queue, self._seen
        pending: BaseException | None = None
        try:
            while True:
                try:
                    event = await (events.athrow(pending) if pending else anext(events))  # type: ignore[attr-defined]
                except StopAsyncIteration:
                    break
                pending = None
                if journal is not None:
                    try:
                        await journal.append(self.session_id, event)
                    except asyncio.CancelledError as exc:  # cancelled between loop steps
                        _uncancel()
                        pending = exc
                if event.type in ev.TERMINAL_TYPES:
                    self._terminal = True
                elif type(event) is ev.Done:
                    self._done = event
                seen.append(event)
                queue.put_nowait(event)
        finally:
            queue.put_nowait(_END)


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def run(
    agent: Agent, input: str, *, approver: Approver | None = None, **session: Any
) -> RunResult:
    """Run `input` through `agent` in a new session and return how it ended."""
    return await Session(agent, **session).run(input, approver=approver).result()


def run_sync(
    agent: Agent, input: str, *, approver: Approver | None = None, **session: Any
) -> RunResult:
    """`run` for scripts without an event loop."""
    return asyncio.run(run(agent, input, approver=approver, **session))


async def collect(
    events: AsyncIterator[ev.Event], on_event: Callable[[ev.Event], Any] | None = None
) -> list[ev.Event]:
    """Every event of a stream, in order (calling `on_event` for each as it arrives)."""
    out = []
    async for event in events:
        if on_event is not None:
            on_event(event)
        out.append(event)
    return out
