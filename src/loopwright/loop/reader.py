"""The reader's side of a run (`driver.Run`): the buffer its task fills with events, and what
`async for` and `anext` take from it — the events buffered, then one wake-up per batch while the
task goes on, until it ends — or `result()` drains at once. `RunReader` is that part of `Run`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from .. import events as ev
from .result import ANSWERED, RunResult, run_result

if TYPE_CHECKING:
    from .output import Output


class RunReader:
    """The buffer between a run's task and its one reader (the base of `driver.Run`)."""

    __slots__ = (
        "_buffer",
        "_ending",
        "_exhausted",
        "_output",
        "_reader",
        "_room",
        "_seqs",
        "_unbounded",
        "_waiter",
        "seq",
    )

    _buffer: deque[ev.Event]
    _ending: asyncio.Future[None] | None  # `result()`, waiting for the end
    _output: Output | None  # the agent's structured output: `RunResult.output` is its value
    _unbounded: bool  # `result()` drains: the loop never waits for room
    _done: ev.Event | None  # the loop's `done`, once it ended
    session_id: str
    _seqs: deque[int | None] | None
    """The log's seq of each event buffered (None: no journal)."""
    seq: int | None
    """The log's sequence number of the event last read (None: not logged, no journal)."""
    _waiter: asyncio.Future[None] | None  # the reader, waiting for an event
    _room: asyncio.Future[None] | None  # the loop, waiting for the reader
    _reader: AsyncGenerator[ev.Event, None] | None  # what `async for` reads
    _exhausted: bool
    _task: asyncio.Task[None] | None  # (the run's)

    def _start(self) -> asyncio.Task[None]:
        raise NotImplementedError  # (the run's task, started on first read)

    def cancel(self) -> None:
        raise NotImplementedError

    def _wake_reader(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _make_room(self) -> None:
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)

    def __aiter__(self) -> AsyncIterator[ev.Event]:
        self._reader = reader = self._read()
        return reader

    async def _read(self) -> AsyncGenerator[ev.Event, None]:
        """What `async for` iterates: the events buffered, then a wait for more (one wake-up
        per batch), until the run's task ends."""
        buffer, seqs = self._buffer, self._seqs
        while await self._filled():
            if seqs is None:
                while buffer:
                    yield buffer.popleft()
            else:
                while buffer:
                    self.seq = seqs.popleft()
                    yield buffer.popleft()

    async def __anext__(self) -> ev.Event:
        if not await self._filled():
            raise StopAsyncIteration
        if self._seqs is not None:
            self.seq = self._seqs.popleft()
        return self._buffer.popleft()

    async def _filled(self) -> bool:
        """Wait until an event is buffered (True), or the run's task has ended (False)."""
        buffer = self._buffer
        while not buffer:
            task = self._task or self._start()
            if task.done():
                self._end(task)
                return False
            if self._room is not None:  # all read: the loop may go on
                self._make_room()
            if self._waiter is not None:  # (it would wait forever: one wake-up slot)
                raise RuntimeError("a run has one reader: another task is reading it already")
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            except asyncio.CancelledError:
                if self._waiter is waiter:
                    self._waiter = None
                self.cancel()  # the reader was cancelled while it waited: so is the run
                raise
        return True

    def _end(self, task: asyncio.Task[None]) -> None:
        """The run's task is over: raise what ended it without its `done` (a failing
        journal), once."""
        if self._exhausted:
            return
        self._exhausted = True
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            raise failure

    async def result(self) -> RunResult[Any]:
        """Drain the run and return how it ended, with every event this call drained. A caller
        cancelled meanwhile cancels the run (and waits for its end)."""
        task = self._start()
        self._unbounded = True
        self._make_room()
        if not task.done():
            self._ending = asyncio.get_running_loop().create_future()
            try:
                await self._ending
            except asyncio.CancelledError:
                self.cancel()
                await asyncio.wait((task,))
                raise
        events = list(self._buffer)
        self._buffer.clear()
        if self._seqs is not None:
            self._seqs.clear()
        self._end(task)
        done = events[-1] if events else self._done  # (all read already: the one it had)
        if not isinstance(done, ev.Done):  # its task was cancelled from outside
            raise asyncio.CancelledError
        output, value = self._output, None
        if output is not None and done.stop_reason in ANSWERED and done.text:
            value = output.value(done.text)  # the text a checked answer ended the run with
        return run_result(
            text=done.text,
            stop_reason=done.stop_reason,
            events=events,
            session_id=self.session_id,
            output=value,
        )
