"""A run in progress: the task that drives the loop, and the buffer its reader takes events
from.

The loop (an async generator) runs in a task the `Run` owns. In that task each event is applied
to the session's state (`replay`: the reducer that also rebuilds it from the log), then goes to
the journal (the loop waits until it is durable) and then into a buffer; the reader takes it
from there and is woken only when it waits, once for all the events buffered meanwhile.
Cancelling a run is cancelling its task: the cancellation lands where the loop awaits, or — if
it comes while the task awaits the journal or the reader — is handed to the loop at the event
it is suspended on. Nothing lands in the reader's code. A commit that fails (`CommitFailed`) is
handed to the loop there too: the run ends with `loop:error`, or raises the log's error when
not even that can be logged.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from .. import events as ev
from ..errors import CommitFailed
from ..state.replay import HANDLERS, apply
from ..state.session_state import SessionState
from .observers import ObservedSession, Observer, observing
from .reader import RunReader
from .result import RunResult as RunResult
from .threads import Signal

if TYPE_CHECKING:
    from .output import Output


class RunJournal(Protocol):
    """What a run asks of its journal (a `session.Journal`; its claim and release of the session
    come bound to the session, as `begin` and `end`)."""

    async def append(self, session_id: str, event: ev.Event) -> int | None: ...

    def seq_of(self, event: ev.Event) -> int | None: ...

    def record(self, event: ev.Event, *, between_runs: bool = False) -> bool: ...


HIGH_WATER = 1024
"""Events a run holds for a consumer that does not read: the loop then waits until the reader
has read them all."""


class Run(RunReader):
    """A run in progress: an async iterator of its events, produced by a task of its own.

    Use it as `async with session.run(...) as run: async for event in run: ...` or drain it
    with `await run.result()`; the first of these starts the loop in a task the run owns. The
    journal sees each event in that task before the loop goes on; the caller reads them from a
    buffer, so nothing it does (or is slow at) holds the loop up, short of `HIGH_WATER` unread
    events. `cancel()` cancels that task, never the caller's; the run still ends with
    `loop:aborted` and `done`. Leaving an `async with` early cancels the run and drains it to
    its `done`.
    """

    __slots__ = (
        "_begin",
        "_cancelled",
        "_done",
        "_entered",
        "_events",
        "_finish",
        "_journal",
        "_observers",
        "_on_end",
        "_prepare",
        "_session",
        "_signals",
        "_state",
        "_task",
        "_watched",
        "session_id",
    )

    def __init__(
        self,
        events: AsyncGenerator[ev.Event, None],
        signals: set[Signal],
        session_id: str,
        journal: RunJournal | None = None,
        session: ObservedSession | None = None,
        begin: Callable[[], Awaitable[None]] | None = None,
        end: Callable[[ev.RunStopReason | None], Awaitable[None]] | None = None,
        output: Output | None = None,
        observers: tuple[Observer, ...] = (),
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._events = events
        self._signals = signals  # the stop signals of its calls in flight
        self.session_id = session_id
        self._journal = journal
        self._session = session
        self._state = session.state if session is not None else SessionState()
        self._begin = begin  # the journal's claim of the session, bound to it
        self._finish = end  # its release, given the stop reason (None: no `done` logged)
        self._on_end: Callable[[Run], None] | None = None  # `watch()`'s: a session's `idle()`
        self._watched = False
        self._output = output  # the agent's structured output: `RunResult.output` is its value
        self._observers = observers
        self._prepare = prepare  # awaited as the task starts (a session's live toolsets)
        self._buffer: deque[ev.Event] = deque()
        self._seqs: deque[int | None] | None = deque() if journal is not None else None
        self.seq: int | None = None
        """The log's sequence number of the event last read (None: not logged, no journal)."""
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None  # the reader, waiting for an event
        self._room: asyncio.Future[None] | None = None  # the loop, waiting for the reader
        self._ending: asyncio.Future[None] | None = None  # `result()`, waiting for the end
        self._reader: AsyncGenerator[ev.Event, None] | None = None  # what `async for` reads
        self._entered = self._cancelled = self._unbounded = self._exhausted = False
        self._done: ev.Event | None = None

    @property
    def finished(self) -> bool:
        """The run's task has ended (or the run was closed before it started)."""
        return self._exhausted if self._task is None else self._task.done()

    @property
    def past_done(self) -> bool:
        """The loop has ended with its `done` (the run may still be ending): what is sent to
        it now is for the next run."""
        return self._done is not None or self.finished

    @property
    def cancelled(self) -> bool:
        """`cancel()` was called (the run may still be ending: see `finished`)."""
        return self._cancelled

    def cancel(self) -> None:
        """Abort the run. Queued steering and follow-ups are dropped at once, and calls whose
        thread has not started will not start; the run's task is cancelled, so the in-flight
        model request, a human's prompt and running tools are cancelled where they wait (a
        thread that runs on is given up: its result says so and its real outcome follows as
        `tool:late_result`). Tools that finished keep their results. A run past its `done` is
        over: nothing changes (its session's `cancel()` drops what was queued). Idempotent."""
        if self._cancelled or self.past_done:
            return
        self._cancelled = True
        if self._state.queued:  # dropped (logged as it was queued, even when the run paused)
            cleared = ev.SteeringCleared()
            if self._journal is not None:
                self._journal.record(cleared)
            apply(self._state, cleared)  # (again, if the journal took it: no change)
        for signal in self._signals:  # at once: a thread cannot be cancelled, and a job still
            signal.set()  # waiting for a thread must never start
        if self._entered:
            assert self._task is not None
            self._task.cancel()
        else:  # not started yet: the loop starts by ending, right after `session`
            self._events = _cancelled_at_start(self._events)

    def hurry(self) -> None:
        """A cancelled run still ending stops waiting for its threads' late results (within
        `tool_grace`) and records its end now: for a process that shuts down."""
        if self._cancelled and not self.past_done and self._task is not None:
            self._task.cancel()

    def _start(self) -> asyncio.Task[None]:
        if self._task is None:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._drive(), name=f"loopwright run {self.session_id}")
            if self._watched:
                self._task.add_done_callback(self._ended)
        return self._task

    def watch(self, on_end: Callable[[Run], None]) -> None:
        """Have `on_end(run)` called once the run is finished (a session's `idle()` asks: a run
        that nobody waits for has no callback scheduled as its task ends, and holds none: the
        session's own callback, held by its run, would make a cycle only the collector frees)."""
        self._on_end = on_end
        if not self._watched:
            self._watched = True
            if self._task is not None:
                self._task.add_done_callback(self._ended)

    def _ended(self, _: object = None) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end(self)

    async def _drive(self) -> None:
        """The run's task: each event is applied to the session's state, then goes to the
        journal, then to the reader's buffer."""
        journal, buffer, seqs = self._journal, self._buffer, self._seqs
        state, handlers = self._state, HANDLERS.get
        stop: ev.RunStopReason | None = None
        try:
            if self._begin is not None:
                await self._begin()
            if self._prepare is not None:
                await self._prepare()
        except BaseException:
            self._wake_all()
            raise
        self._entered = True
        observers = self._observers
        observe = observing(observers, self, self._session) if observers else None
        events, done, limit = self._events, ev.Done, HIGH_WATER
        step, push = events.__anext__, buffer.append
        plain = seqs is None and observe is None  # nothing but the state and the buffer
        pushed, failed = True, False
        held: list[ev.Event] = []  # (see `_HELD`)
        try:
            event = await step()
            while True:  # until the loop, past its `done`, ends (StopAsyncIteration)
                handler = handlers(type(event))
                if handler is not None:
                    handler(state, event)
                if plain:  # the common case in few steps: no reader waits, room is left
                    push(event)  # (or `result()` drains: the loop never waits for room)
                    if self._waiter is None and (self._unbounded or len(buffer) < limit):
                        event = await step()
                        continue
                elif observe is not None:
                    observe(event)
                try:
                    if plain:
                        pass  # pushed above
                    elif seqs is None:
                        buffer.append(event)
                    else:
                        pushed = False
                        if type(event) is done:
                            stop = event.stop_reason
                        assert journal is not None
                        seq = await journal.append(self.session_id, event)
                        if type(event) in _HELD or (
                            held and seq is None and type(event) is not done
                        ):
                            held.append(event)
                        else:
                            if held:
                                self._release(held)
                            seqs.append(seq)
                            buffer.append(event)
                        pushed = True
                    if self._waiter is not None:
                        self._wake_reader()
                    if len(buffer) >= limit and not self._unbounded and type(event) is not done:
                        self._room = asyncio.get_running_loop().create_future()
                        await self._room
                except asyncio.CancelledError as exc:
                    # Cancelled here (a journal or the reader was awaited), not in the loop:
                    # the loop gets it where it is suspended, at this event's `yield`.
                    if not pushed:  # its append was cut short: it may not be in the log
                        self._release(held)
                        buffer.append(event)
                        if seqs is not None:
                            seqs.append(None)
                        self._wake_reader()
                        pushed = True
                    if type(event) is done:
                        await events.aclose()  # it waits at its last `yield`: end it now
                        return
                    event = await (step() if type(event) in _ENDING else events.athrow(exc))
                    continue
                except CommitFailed as exc:
                    # The log did not take it: the loop ends with `loop:error`, logged if the
                    # log takes that (the event, applied, stays in the stream without a seq).
                    if failed or type(event) is done or type(event) in _ENDING:
                        raise
                    failed = True
                    if not pushed:
                        self._release(held)
                        buffer.append(event)
                        seqs.append(None)  # type: ignore[union-attr]
                        self._wake_reader()
                        pushed = True
                    event = await events.athrow(exc)
                    continue
                event = await step()
        except StopAsyncIteration:
            self._done = event  # (the loop's last: its `done`)
        except CommitFailed as exc:  # not even the run's end could be logged: the log's error
            stop = None  # its `done` is not in the log: the session is left interrupted
            cause = exc.__cause__
            if not isinstance(cause, Exception):
                raise
            raise cause from cause.__cause__
        finally:
            if observe is not None:
                observe(None)
            try:
                if self._finish is not None:
                    await self._finish(stop)
            finally:
                # the run holds its session no longer (nor its journal's calls bound to it): no
                # cycle is left
                self._session = self._begin = self._finish = None
                self._wake_all()  # the task ends in this step: whoever wakes sees it done

    def _release(self, held: list[ev.Event]) -> None:
        """Hand the reader the events held (`_HELD`), each with its seq if it is in the log
        (committed with an event after it)."""
        assert self._journal is not None and self._seqs is not None
        self._seqs.extend(map(self._journal.seq_of, held))
        self._buffer.extend(held)
        held.clear()

    def _wake_all(self) -> None:
        self._wake_reader()
        ending, self._ending = self._ending, None
        if ending is not None and not ending.done():
            ending.set_result(None)

    async def aclose(self) -> None:
        """Stop listening: an unfinished run is cancelled and drained to its `done`."""
        reader, self._reader = self._reader, None
        if reader is not None and not getattr(reader, "ag_running", False):  # one that runs in
            await reader.aclose()  # another task ends by itself, once the run has
        if self._task is None:
            self._exhausted = True
            self._ended()
            await self._events.aclose()
            return
        self._unbounded = True
        self._make_room()
        self.cancel()
        await asyncio.wait((self._task,))
        self._buffer.clear()
        if self._seqs is not None:
            self._seqs.clear()
        self._end(self._task)

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_HELD = (ev.ApprovalPending, ev.QuestionPending, ev.ReplyTransformed, ev.MessageCompleted)
"""Events a run with a journal holds from its reader, with every event after them, until an
event after them is committed (or the run ends): a run's own announcements of pending items,
each committed with the `pending:requested` after it, which names its call, so that nobody sees
(and decides) an item whose call the log does not name; and a reply, committed with what
follows it (its calls' intent, a pending item, or the run's end), so that no stream shows a
reply the log could lose in a crash (RELIABILITY P8), nor the model's own that a hook changed
(`reply:transformed`, committed with it)."""
_ENDING = frozenset(
    {
        ev.LoopDone,
        ev.LoopMaxTurns,
        ev.LoopDenied,
        ev.LoopPaused,
        ev.LoopAborted,
        ev.LoopError,
        ev.LoopTerminated,
    }
)


async def _cancelled_at_start(
    events: AsyncGenerator[ev.Event, None],
) -> AsyncGenerator[ev.Event, None]:
    """A run cancelled before it started: `session`, then the loop ends as cancelled."""
    try:
        yield await events.__anext__()
        yield await events.athrow(asyncio.CancelledError())
        async for event in events:
            yield event
    finally:
        await events.aclose()
