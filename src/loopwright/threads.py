"""The worker threads that sync tools run in: one bounded pool per process.

`submit(fn, kwargs, cancelled)` queues a job that runs `fn(**kwargs)` in a worker thread, in a
copy of the caller's context, and settles `job.future` on the caller's event loop. A job whose
`cancelled` event is set before a worker takes it never starts; one already running cannot be
stopped (its tool may watch the event), and its done-callbacks learn how it ended. Threads
start on demand, up to `MAX_THREADS`, and stay; they are daemon threads, so a tool still
running does not hold the process at exit.

Leaner than `ThreadPoolExecutor` + `asyncio.wrap_future` (a third of the work per call): one
queue, one future, one wake-up of the loop per job.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

MAX_THREADS = 32
"""Sync tool calls that run at once in this process; more wait for a free thread."""
NOT_STARTED: Any = object()
"""A job's result when it was cancelled before a worker took it."""

_QUEUED, _RUNNING, _DONE = 0, 1, 2


class Job:
    """One sync call handed to the pool."""

    __slots__ = (
        "_callbacks",
        "cancelled",
        "context",
        "error",
        "fn",
        "future",
        "kwargs",
        "loop",
        "orphaned",
        "state",
        "value",
    )

    def __init__(
        self, fn: Callable[..., Any], kwargs: dict[str, Any], cancelled: threading.Event
    ) -> None:
        self.fn, self.kwargs, self.cancelled = fn, kwargs, cancelled
        self.context = contextvars.copy_context()
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()
        self.state = _QUEUED
        self.value: Any = None
        self.error: BaseException | None = None
        self.orphaned = False
        """It finished after its event loop closed (its callbacks ran in the worker)."""
        self._callbacks: list[Callable[[Job], None]] = []

    def cancel(self) -> bool:
        """Tell the call to stop; True when it will never start (no worker had taken it)."""
        self.cancelled.set()
        return self.state == _QUEUED  # a worker marks it running before it checks the event

    def done(self) -> bool:
        return self.state == _DONE

    def result(self) -> Any:
        """What it returned (`NOT_STARTED` if it never started), or raise what it raised."""
        if self.error is not None:
            raise self.error
        return self.value

    def add_done_callback(self, callback: Callable[[Job], None]) -> None:
        """Call `callback(job)` on the loop once it is done (now, if it is)."""
        if self.state == _DONE and not self._callbacks:
            callback(self)
        else:
            self._callbacks.append(callback)

    def run(self) -> None:  # in a worker thread
        self.state = _RUNNING
        if self.cancelled.is_set():
            self.value = NOT_STARTED
        else:
            try:
                self.value = self.context.run(self.fn, **self.kwargs)
            except Exception as exc:
                self.error = exc
            except BaseException as exc:  # SystemExit in a thread: a failure of this call only
                self.error = RuntimeError(f"{type(exc).__name__} raised in a tool thread")
        try:
            self.loop.call_soon_threadsafe(self._settle)
        except RuntimeError:  # the loop is closed: nobody awaits it any more
            self.orphaned = True
            self._settle()

    def _settle(self) -> None:
        self.state = _DONE
        future = self.future
        if not future.done() and not self.orphaned:
            if self.error is not None:
                future.set_exception(self.error)
            else:
                future.set_result(self.value)
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


class _Pool:
    def __init__(self, size: int) -> None:
        self.size = size
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = self.idle = 0

    def submit(self, job: Job) -> None:
        with self.lock:
            spawn = not self.idle and self.threads < self.size
            if spawn:
                self.threads += 1
            elif self.idle:
                self.idle -= 1  # that idle worker takes it
        self.jobs.put(job)
        if spawn:
            name = f"loopwright-tool-{self.threads}"
            threading.Thread(target=self.work, name=name, daemon=True).start()

    def work(self) -> None:
        while True:
            self.jobs.get().run()
            with self.lock:
                self.idle += 1


_pool = _Pool(MAX_THREADS)


def submit(fn: Callable[..., Any], kwargs: dict[str, Any], cancelled: threading.Event) -> Job:
    """Run `fn(**kwargs)` in a worker thread; await `job.future` for its result."""
    job = Job(fn, kwargs, cancelled)
    _pool.submit(job)
    return job
