"""The worker threads that sync tools run in: one bounded pool per process.

`submit(fn, kwargs, cancelled, timeout)` queues a job that runs `fn(**kwargs)` in a worker
thread, in a copy of the caller's context, and settles `job.future` on the caller's event loop
(with None: the job holds what the call returned or raised). A job whose `cancelled` signal is
set before a worker takes it never starts; one already running cannot be stopped (its tool may
watch the signal), and its done-callbacks learn how it ended. With a `timeout`, the future
settles when the time is up even if the thread runs on (`job.timed_out`). Threads start on
demand (by a spawner thread, never by the event loop), up to `MAX_THREADS`, and stay; they are
daemon threads, so a tool still running does not hold the process at exit. A thread whose call
was given up on while it runs (`job.cancel()`: cancelled, or past its timeout) no longer counts
against `MAX_THREADS`: another may start in its place, so tools that ignore their stop signal
cannot starve the calls after them (up to `MAX_THREADS` such threads at once; each ends when
its call returns).

Leaner than `ThreadPoolExecutor` + `asyncio.wrap_future`: one queue, one future per job, and
one wake-up of the loop for all the jobs that finish together (the workers drop them in the
loop's inbox; the first one in wakes the loop, which settles them all).
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("loopwright.tools")

MAX_THREADS = 32
"""Sync tool calls that run at once in this process; more wait for a free thread."""
NOT_STARTED: Any = object()
"""A job's result when it was cancelled before a worker took it."""

_QUEUED, _RUNNING, _DONE = 0, 1, 2


class Signal(Protocol):
    """A call's stop signal: `threading.Event` when its tool can see it (`ToolContext`)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


class Flag:
    """The stop signal of a call whose tool cannot see one: only the pool reads it (a job
    whose flag is set before it starts never starts). Cheaper than a `threading.Event`."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Job:
    """One sync call handed to the pool."""

    __slots__ = (
        "_callbacks",
        "_inbox",
        "abandoned",
        "cancelled",
        "context",
        "error",
        "fn",
        "future",
        "kwargs",
        "orphaned",
        "returned",
        "state",
        "timed_out",
        "value",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        kwargs: dict[str, Any],
        cancelled: Signal,
        timeout: float | None = None,
    ) -> None:
        self.fn, self.kwargs, self.cancelled = fn, kwargs, cancelled
        self.context = contextvars.copy_context()
        inbox = self._inbox = _inbox()
        self.future: asyncio.Future[None] = inbox.loop.create_future()
        self.state = _QUEUED
        self.value: Any = None
        self.error: BaseException | None = None
        self.orphaned = False
        """It finished after its event loop closed (its callbacks ran in the worker)."""
        self.timed_out = False
        """Its future settled because the timeout passed, not because it finished."""
        self.returned = self.abandoned = False  # (the pool's, under its lock)
        self._callbacks: list[Callable[[Job], None]] = []
        if timeout is not None:
            inbox.watch(self, timeout)

    def cancel(self) -> bool:
        """Tell the call to stop; True when it will never start (no worker had taken it). One
        that runs on is given up on: its thread no longer counts against the pool's size."""
        self.cancelled.set()
        if self.state == _QUEUED:  # a worker marks it running before it checks the signal
            return True
        _pool.release(self)
        return False

    def done(self) -> bool:
        return self.state == _DONE

    def result(self) -> Any:
        """What it returned (`NOT_STARTED` if it never started), or raise what it raised, once:
        the job then lets go of the error (whose traceback holds the frames that hold this job,
        a cycle with the run's objects in it that only the collector would free)."""
        if self.error is not None:
            raise self._hand_over()  # (no local holds it: the traceback holds this frame)
        return self.value

    def _hand_over(self) -> BaseException:
        error, self.error = self.error, None
        assert error is not None
        return error

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
            return
        try:
            self.value = self.context.run(self.fn, **self.kwargs)
        except Exception as exc:
            self.error = exc
        except BaseException as exc:  # SystemExit in a thread: a failure of this call only
            self.error = RuntimeError(f"{type(exc).__name__} raised in a tool thread")

    def _expire(self) -> None:
        if not self.future.done():
            self.timed_out = True
            self.future.set_result(None)

    def _settle(self) -> None:
        self.state = _DONE
        future = self.future
        if not future.done() and not self.orphaned:
            future.set_result(None)
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


class _Inbox:
    """Jobs of one event loop that finished, settled on that loop in one callback per batch;
    and the deadlines of its jobs with a timeout, watched by one timer of the loop (armed for the
    earliest; a job that finishes first is only dropped, no timer is cancelled)."""

    __slots__ = ("armed", "deadlines", "jobs", "lock", "loop", "order", "waking")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.jobs: deque[Job] = deque()
        self.lock = threading.Lock()
        self.waking = False
        self.deadlines: list[tuple[float, int, Job]] = []  # a heap, earliest first
        self.order = itertools.count()  # (ties of deadlines: first come, first expired)
        self.armed: asyncio.TimerHandle | None = None

    def watch(self, job: Job, timeout: float) -> None:  # on the loop
        when = self.loop.time() + timeout
        heapq.heappush(self.deadlines, (when, next(self.order), job))
        armed = self.armed
        if armed is None or when < armed.when():
            if armed is not None:
                armed.cancel()
            self.armed = self.loop.call_at(when, self.expire)

    def expire(self) -> None:  # on the loop, when the earliest deadline is due
        due, self.armed = self.armed, None
        deadlines, limit = self.deadlines, due.when() if due is not None else self.loop.time()
        while deadlines and (deadlines[0][0] <= limit or deadlines[0][2].state == _DONE):
            job = heapq.heappop(deadlines)[2]
            if job.state != _DONE:
                job._expire()
        if deadlines:
            self.armed = self.loop.call_at(deadlines[0][0], self.expire)

    def put(self, job: Job) -> None:  # in a worker thread
        with self.lock:
            self.jobs.append(job)
            if self.waking:
                return  # the loop was woken and has not drained yet: it takes this one too
            self.waking = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            for orphan in self.take():
                orphan.orphaned = True
                orphan._settle()

    def take(self) -> list[Job]:
        with self.lock:
            jobs = list(self.jobs)
            self.jobs.clear()
            self.waking = False
        return jobs

    def drain(self) -> None:  # on the loop
        for job in self.take():
            job._settle()
        deadlines = self.deadlines  # finished jobs leave the deadlines (those first in line)
        while deadlines and deadlines[0][2].state == _DONE:
            heapq.heappop(deadlines)


_last: _Inbox | None = None


def _inbox() -> _Inbox:
    """The running loop's inbox (one loop runs at a time in most processes: kept at hand)."""
    global _last
    loop = asyncio.get_running_loop()
    inbox = _last
    if inbox is None or inbox.loop is not loop:
        inbox = _last = _Inbox(loop)
    return inbox


class _Pool:
    """Workers that take jobs from one queue. The loop never waits for a thread to start: when
    a job finds no idle worker, a spawner thread starts one, and only while jobs are still
    waiting (a worker that frees up takes the next one first), so a burst of quick calls is
    served by the threads it needs, and blocking calls get a thread each, up to `size`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0  # workers waiting for a job that no queued job is meant for
        self.backlog = 0  # queued jobs that no worker is on its way to take
        self.wanted = threading.Event()  # the spawner's cue: jobs are waiting
        self.spawner: threading.Thread | None = None
        self.abandoned = 0  # threads running calls given up on (not in `threads`)

    def submit(self, job: Job) -> None:
        spawner = None
        with self.lock:
            if self.idle:
                self.idle -= 1
                spawn = False
            else:
                self.backlog += 1
                spawn = self.threads < self.size
                if spawn and self.spawner is None:
                    spawner = self.spawner = threading.Thread(
                        target=self.spawn, name="loopwright-tool-spawner", daemon=True
                    )
        self.jobs.put(job)
        if spawner is not None:
            spawner.start()
        if spawn:
            self.wanted.set()

    def spawn(self) -> None:
        while True:
            self.wanted.wait()
            self.wanted.clear()
            while True:
                with self.lock:
                    if not self.backlog or self.threads >= self.size:
                        break
                    self.backlog -= 1  # the new worker takes a waiting job
                    self.threads += 1
                    name = f"loopwright-tool-{self.threads}"
                threading.Thread(target=self.work, name=name, daemon=True).start()

    def release(self, job: Job) -> None:
        """The caller gave up on `job` while it runs: its thread stops counting, and one more
        may start for the jobs waiting (while fewer than `size` threads are given up on)."""
        with self.lock:
            if job.state != _RUNNING or job.returned or job.abandoned:
                return
            if self.abandoned >= self.size:
                log.warning("%d tool threads run calls given up on: new calls wait", self.size)
                return
            job.abandoned = True
            self.abandoned += 1
            self.threads -= 1
            spawn = self.backlog > 0
        if spawn:
            self.wanted.set()

    def work(self) -> None:
        while True:
            job = self.jobs.get()
            job.run()
            with self.lock:  # free before its loop hears of it: the next call needs no thread
                job.returned = True
                leave = job.abandoned  # replaced already: this thread ends
                if leave:
                    self.abandoned -= 1
                elif self.backlog:
                    self.backlog -= 1  # it takes a job that is waiting
                else:
                    self.idle += 1
            job._inbox.put(job)
            if leave:
                return
            del job  # an idle worker holds no job (its result, its context, its loop)


_pool = _Pool(MAX_THREADS)  # the process's threads (as concurrent.futures' default executor)


def _forked() -> None:
    """A forked child has none of its parent's threads: it starts with an empty pool."""
    global _pool, _last
    _pool, _last = _Pool(MAX_THREADS), None


os.register_at_fork(after_in_child=_forked)


def submit(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    cancelled: Signal,
    timeout: float | None = None,
) -> Job:
    """Run `fn(**kwargs)` in a worker thread; await `job.future`, then read `job.result()`."""
    job = Job(fn, kwargs, cancelled, timeout)
    _pool.submit(job)
    return job
