"""Running the calls a batch allowed, and what becomes of a call that is cut off.

`ToolRunner` runs allowed calls and streams their events: concurrently (at most `concurrency` at
once) unless one is sequential, then one at a time in call order; a lone sync call runs in the
run's own task. `tool:started` is yielded before its call starts (a journal commits the intent
first) and each call's events stay in order. Nothing starts after a cancel: each call begins at
a checkpoint where a cancel already requested lands first. One call to its outcome, and the
events that close it, are `calls`.

A cancel or a timeout stops an async call where it awaits. A thread cannot be stopped, so its
call is given up: its `ToolContext.cancelled` is set and its result says it was still running.
When the thread finishes, its real outcome is recorded as `tool:late_result` while the run is
open: the run waits up to `grace` seconds for such threads before it ends; one that finishes
later, or once a later call took its id (a model may reuse an id once its call has a result), is
reported to the `loopwright.tools` logger only, which also logs each call that raised (`calls`)
and what a call reported after it was over (WARNING: dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .. import events as ev
from ..events import Event
from ..hooks import RunInfo
from ..messages import ToolCall
from ..state._values import maker
from ..tools import Outcome, Scheduled, ToolContext
from . import threads
from .calls import (
    NOT_RUN,
    STILL_RUNNING,
    STOPPED,
    WITHHELD,
    call_inline,
    cancel_due,
    cap_of,
    execute,
    result_events,
    settled,
    timed_out_text,
)
from .hook_calls import call_hook
from .hook_points import Around
from .progress import CallEvents
from .stored import reader
from .threads import NOT_STARTED, Flag, Job, Signal

log = logging.getLogger("loopwright.tools")
tool_started = maker(ev.ToolStarted)  # (see `_values.maker`)


class _Never(threading.Event):
    """The stop signal of an inline call: nothing can stop one, so it is never set."""

    def set(self) -> None:
        pass


NEVER = _Never()


@dataclass(slots=True)
class ToolRunner:
    """Runs allowed calls and streams their events; fills `outcomes` by call id as they finish.

    On cancellation, `outcomes` holds the calls that finished and `unfinished` what each other
    call announced was doing (the text its result gives); threads given up on still running are
    in `strays` until their late results arrive; `latest` is the last call started with each id
    (none once a later reply used the id again).
    """

    make_context: Callable[[Scheduled, Callable[[Event], None], threading.Event], ToolContext]
    outcomes: dict[str, Outcome]
    concurrency: int
    timeout: float | None
    max_output: int
    after: Callable[[Scheduled, Outcome], Awaitable[Outcome]] | None = None
    signals: set[Signal] = field(default_factory=set)
    """The stop signals of the calls in flight (the run's `cancel()` sets them at once)."""
    grace: float = 5.0
    items: dict[str, Scheduled] = field(default_factory=dict)
    unfinished: dict[str, str] = field(default_factory=dict)
    strays: set[Job] = field(default_factory=set)
    late: list[tuple[Scheduled, ev.ToolLateResult]] = field(default_factory=list)
    latest: dict[str, Scheduled] = field(default_factory=dict)
    keys: Callable[[ToolCall], str] | None = None
    """A call's idempotency key (`keys.CallKeys`), made as it starts; its context gets it."""
    around: Around | None = None  # (the `around_tool` hook, as `hook_points.wrapped` makes it)
    _arrival: asyncio.Future[None] | None = None
    _closed: bool = False

    @staticmethod
    def alone(batch: list[Scheduled]) -> bool:
        """One sync call: it runs in the run's own task (nothing can interleave)."""
        return len(batch) == 1 and not batch[0].tool.is_async

    def started(self, item: Scheduled) -> ev.ToolStarted:
        call = item.call
        self.items[call.id] = self.latest[call.id] = item
        key = self.keys(call) if self.keys is not None else None
        return tool_started(
            id=call.id,
            tool=call.name,
            args=item.args,
            detail_text=item.reason,
            idempotency_key=key,
            label=item.tool.label,
        )

    async def lone(self, scheduled: list[Scheduled]) -> Sequence[Event]:
        """Run the one sync call of a batch, if it has one (after its `tool:started` went out):
        its events. One that reports nothing and has no `after_tool` hook is run here (inline,
        on the loop; else in a thread); any other as a call of a group is (`_finish`)."""
        if not scheduled:
            return ()
        item = scheduled[0]
        tool = item.tool
        if tool.context_param is None and self.after is None and self.around is None:
            if tool.inline:
                outcome = call_inline(item, None, self.max_output)
            else:
                outcome = await self._threaded(item, _unheard)
            self.outcomes[item.call.id] = outcome
            return result_events(item, outcome)
        updates: list[Event] = []
        outcome = await self._finish(item, updates.append)
        return [*updates, *result_events(item, outcome)]

    async def run(self, batch: list[Scheduled]) -> AsyncIterator[Event]:
        sequential = any(item.tool.sequential for item in batch)
        for group in ([item] for item in batch) if sequential else [batch]:
            if cancel_due():
                await asyncio.sleep(0)  # it lands before the group starts
            for item in group:
                yield self.started(item)
            if self.alone(group):
                for event in await self.lone(group):
                    yield event
                continue
            async for event in self._concurrently(group):
                yield event

    def reset(self) -> None:
        """The batch is closed."""
        self.outcomes.clear()
        self.items.clear()
        self.unfinished.clear()

    def _context(
        self, item: Scheduled, emit: Callable[[Event], None], signal: threading.Event
    ) -> ToolContext:
        ctx = self.make_context(item, emit, signal)
        if self.keys is not None:  # (the same key as its `tool:started`: the batch is open)
            ctx.idempotency_key = self.keys(item.call)
        return ctx

    def _finish(self, item: Scheduled, emit: Callable[[Event], None]) -> Awaitable[Outcome]:
        """Run one call to its outcome. What its `ToolContext` emits is bounded (`progress`);
        what it reports once the call is over would follow its `tool:result`: it is dropped."""
        if item.tool.context_param is None:
            return self._settle(item, emit)
        return self._until_over(item, CallEvents(emit, item, cap_of(item, self.max_output)))

    async def _until_over(self, item: Scheduled, until: CallEvents) -> Outcome:
        try:
            return await self._settle(item, until)
        finally:
            until.close()

    async def _settle(
        self, item: Scheduled, emit: Callable[[Event], None], bare: bool = False
    ) -> Outcome:
        tool, call_id = item.tool, item.call.id
        if self.around is not None and not bare:  # the hook wraps the call (`hook_points`)
            outcome = await self.around(item, partial(self._settle, item, emit, True))
        elif tool.inline:
            ctx = None if tool.context_param is None else self._context(item, emit, NEVER)
            outcome = call_inline(item, ctx, self.max_output)
        elif tool.is_async:
            ctx, signal = None, None
            if tool.context_param is not None:  # a signal only a tool that sees it needs
                signal = threading.Event()
                ctx = self._context(item, emit, signal)
                self.signals.add(signal)
            self.unfinished[call_id] = STOPPED
            try:
                outcome = await execute(item, ctx, timeout=self.timeout, max_output=self.max_output)
            except asyncio.CancelledError:
                if signal is not None:
                    signal.set()
                raise
            finally:
                if signal is not None:
                    self.signals.discard(signal)
            del self.unfinished[call_id]
        else:
            outcome = await self._threaded(item, emit)
        if self.after is not None and outcome.suspended is None and not bare:
            self.outcomes[call_id] = WITHHELD  # (its result, should the hook raise or be stopped)
            outcome = await self.after(item, outcome)
        self.outcomes[call_id] = outcome
        return outcome

    async def _threaded(self, item: Scheduled, emit: Callable[[Event], None]) -> Outcome:
        """A sync call in a worker thread, awaited until it finishes or its time is up."""
        tool, call_id = item.tool, item.call.id
        limit = tool.timeout if tool.timeout is not None else self.timeout
        kwargs = item.kwargs
        signal: Signal
        if tool.context_param is None:
            signal = Flag()  # only the pool reads it
        else:
            signal = threading.Event()
            ctx = self._context(item, _from_thread(emit, signal), signal)
            if limit is not None:
                ctx.deadline = time.monotonic() + limit
            kwargs = {**kwargs, tool.context_param: ctx}
        self.signals.add(signal)
        self.unfinished[call_id] = STOPPED
        job = threads.submit(tool.fn, kwargs, signal, limit)
        try:
            await job.future
        except asyncio.CancelledError:
            signal.set()
            self._give_up(item, job)
            raise
        finally:
            self.signals.discard(signal)
        del self.unfinished[call_id]
        if not job.timed_out:
            return settled(item, job, self.max_output)
        assert limit is not None
        text = timed_out_text(item, limit)
        if job.cancel() or job.value is NOT_STARTED:
            text += " It never started: every tool thread was busy."
        elif job.done():  # it finished as the time ran out: what it really did
            return settled(item, job, self.max_output)
        else:
            self._adopt(item, job)
            text += (
                " It is still running in its thread and may yet do its work; its outcome is"
                " recorded if it finishes before this run ends."
            )
        return Outcome(content=text, is_error=True)

    async def _concurrently(self, group: list[Scheduled]) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | tuple[Scheduled, Outcome]] = asyncio.Queue()
        limit = asyncio.Semaphore(max(1, self.concurrency))

        run = asyncio.current_task()  # the run's: a cancel of it is asked of it at once

        async def worker(item: Scheduled) -> None:
            async with limit:
                if run is not None and run.cancelling():  # (by a sibling, a hook, a reader:
                    return  # it lands in the run's task later) this call never starts
                queue.put_nowait((item, await self._finish(item, queue.put_nowait)))

        try:
            async with asyncio.TaskGroup() as tasks:
                for item in group:
                    tasks.create_task(worker(item))
                for _ in range(len(group)):
                    got = await queue.get()
                    while not isinstance(got, tuple):
                        yield got
                        got = await queue.get()
                    for event in result_events(*got):
                        yield event
        except asyncio.CancelledError as cancel:  # (3.11's TaskGroup holds it in a frame of its
            raise cancel.with_traceback(None) from None  # traceback: a cycle, unless cut)

    # ---- calls given up while their thread runs -------------------------------------------

    def _give_up(self, item: Scheduled, job: Job) -> None:
        """The call was cancelled while its job was queued or running in a thread."""
        call_id = item.call.id
        if job.cancel() or job.value is NOT_STARTED:
            self.unfinished[call_id] = NOT_RUN
        elif job.done():  # it finished as the cancel came: its real result stands (withheld
            done = settled(item, job, self.max_output)  # when its after_tool hook cannot run)
            self.outcomes[call_id] = done if self.after is None else WITHHELD
        else:
            self.unfinished[call_id] = STILL_RUNNING
            self._adopt(item, job)

    def _adopt(self, item: Scheduled, job: Job) -> None:
        self.strays.add(job)
        job.add_done_callback(lambda job: self._landed(item, job))

    def _landed(self, item: Scheduled, job: Job) -> None:
        self.strays.discard(job)
        outcome, call = settled(item, job, self.max_output), item.call
        outcome = outcome if self.after is None else WITHHELD  # (its hook can no longer run)
        late = ev.ToolLateResult(
            id=call.id, tool=call.name, content=outcome.content, is_error=outcome.is_error
        )
        if self._closed or job.orphaned:  # the run has ended (or its loop is gone)
            _log_late(item, late, "its run had ended")
            return
        if self.latest.get(call.id) is item:  # (`arrived` looks again: a later call may take it)
            self.late.append((item, late))
        else:  # the stream would give it to the later call
            _log_late(item, late, "a later call took its id")
        if self._arrival is not None and not self._arrival.done():
            self._arrival.set_result(None)

    def arrived(self) -> list[Event]:
        """The late results that arrived so far, of calls whose id no later call has taken (the
        stream would give such a result to that call)."""
        arrived, self.late = self.late, []
        for item, late in arrived:
            if self.latest.get(item.call.id) is not item:
                _log_late(item, late, "a later call took its id")
        return [late for item, late in arrived if self.latest.get(item.call.id) is item]

    async def settle(self) -> None:
        """Wait up to `grace` seconds for the threads still running (their results come meanwhile)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self.grace
        while self.strays and (left := until - loop.time()) > 0:
            self._arrival = loop.create_future()
            try:
                await asyncio.wait((self._arrival,), timeout=left)
            finally:
                self._arrival = None

    def close(self) -> list[Event]:
        """The run ends: the late results that arrived (a thread that finishes later is logged)."""
        self._closed = True
        return self.arrived()


def _from_thread(emit: Callable[[Event], None], signal: threading.Event) -> Callable[[Event], None]:
    """`emit` for a call in a worker thread: delivered on the loop, while the call is awaited."""
    loop = asyncio.get_running_loop()

    def deliver(event: Event) -> None:
        if not signal.is_set():
            emit(event)

    def post(event: Event) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            loop.call_soon_threadsafe(deliver, event)

    return post


def _unheard(event: Event) -> None:
    """The `emit` of a call whose tool sees no `ToolContext`: nothing is ever reported."""


def _log_late(item: Scheduled, late: ev.ToolLateResult, when: str) -> None:
    error = " with an error" if late.is_error else ""
    what = (item.tool.name, item.call.id, when, error, late.content[:1000])
    log.warning("tool %s (call %s) finished after %s%s: %s", *what)


# ---- what the run gives its runner --------------------------------------------------------------


def tool_context(
    info: RunInfo,
    approver: Any,
    session: Any,
    item: Scheduled,
    emit: Any,
    cancelled: threading.Event,
) -> ToolContext:
    """The `ToolContext` of one call of the run `info` names."""
    return ToolContext(
        session_id=info.session_id,
        tenant=info.tenant,
        agent=info.agent,
        call_id=item.call.id,
        tool=item.call.name,
        approver=approver,
        open_session=session.child if session is not None else None,
        results=reader(session) if session is not None else None,
        cancelled=cancelled,
        answers=dict(item.answers) if item.answers else {},
        resumes=item.resumes,
        _emit=emit,
    )


async def after_tool(hook: Any, info: RunInfo, item: Scheduled, outcome: Outcome) -> Outcome:
    """The `after_tool` hook as the runner calls it: a replacement outcome, or the same."""
    return await call_hook(hook, info, item.call, outcome) or outcome
