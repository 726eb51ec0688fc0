"""An injected clock for tests in which time must pass: deadlines, timeouts, retries.

`@virtual` runs an async test on an event loop whose clock stands still while anything can
run and, once everything waits, jumps straight to the next timer. Sleeps, deadlines and
timeouts then fire in a fixed order at exact times, as fast as the code runs, however loaded
the machine is; a test may assert what `loop.time()` read when something happened.

I/O between peers on this loop (a Unix socket: a write is readable at once) is seen before
the clock moves, and it never moves while a job of the loop's executor (`asyncio.to_thread`)
runs. Threads the loop cannot see, it does not wait for: loopwright runs sync tools in its own
pool, so the tools of a test on virtual time are async (or `inline`). A loop with nothing to
run, no timer and no I/O for a minute of real time is a deadlock: the test fails instead of
hanging.
"""

from __future__ import annotations

import asyncio
import functools
import selectors
from collections.abc import Callable, Coroutine
from typing import Any

DEADLOCK = 60.0
"""Real seconds a loop with nothing to do waits for I/O or a thread before failing."""


class _Selector(selectors.DefaultSelector):
    loop: VirtualClockLoop

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None or self.loop.threads:  # only I/O or a thread can wake the loop
            ready = super().select(DEADLOCK)
            if not ready and not self.loop.threads:
                raise RuntimeError(f"deadlock: nothing to run for {DEADLOCK:g} s")
            return ready
        self.loop.now += timeout  # everything waits: the next timer is due now
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time (see the module docstring)."""

    def __init__(self) -> None:
        selector = _Selector()
        selector.loop = self
        super().__init__(selector)
        self.now = 0.0
        self.threads = 0

    def time(self) -> float:
        return self.now

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        future = super().run_in_executor(executor, func, *args)
        self.threads += 1

        def finished(_: object) -> None:
            self.threads -= 1

        future.add_done_callback(finished)
        return future


def virtual(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run this async test on a `VirtualClockLoop` (the test itself becomes synchronous)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
            runner.run(test(*args, **kwargs))

    return run
