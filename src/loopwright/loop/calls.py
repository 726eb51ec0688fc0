"""One tool call to its outcome: running an async or inline call, what a call that returned or
raised produced (as the model will read it), and the events that close a call that ran.

The texts a call cut off gets as its result are here too (`NOT_RUN`, `STOPPED`, `STILL_RUNNING`,
`WITHHELD`); `runner.ToolRunner` schedules the calls of a batch and decides which one applies.
A call that raised is logged to the `loopwright.tools` logger (WARNING, with its traceback;
`ToolError`, a message meant for the model, at DEBUG).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from .. import events as ev
from ..attachments import split_images
from ..errors import ToolError
from ..events import Event
from ..state._values import maker
from ..state.text import valid
from ..tools import NeedsAnswer, Outcome, Scheduled, Suspend, ToolContext, ToolReturn, to_content
from .progress import cut
from .stored import over_limit
from .threads import NOT_STARTED, Job

log = logging.getLogger("loopwright.tools")

MAX_ATTACHMENTS = 20
"""Attachments one result keeps (in order); the result's text says how many more were dropped."""

NOT_RUN = "[cancelled: the call did not start]"
STOPPED = "[cancelled: the call was stopped while it ran; it may have done part of its work]"
STILL_RUNNING = (  # (a thread that outlives the run's grace is logged for operators only)
    "[cancelled: the tool was still running and may yet do its work; its outcome is recorded "
    "if it finishes before this run ends]"
)
UNHOOKED = "[error: the call ran but its after_tool hook did not finish: its output is withheld]"
WITHHELD = Outcome(content=UNHOOKED, is_error=True)  # (its raw output is never the call's result)
# (the values every call makes, by their makers: see `_values.maker`)
toollane_result = maker(ev.ToollaneResult)
tool_output, tool_result, new_outcome = maker(ev.ToolOutput), maker(ev.ToolResult), maker(Outcome)


def cancel_due() -> bool:
    """A cancel of the current task was requested and has not landed: `await asyncio.sleep(0)`
    lands it before anything new starts. asyncio delivers a task's cancel only where the task
    suspends: one requested from inside the run's own task (a hook, an inline tool) would
    otherwise land only after the next call had started."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def execute(
    item: Scheduled, ctx: ToolContext | None, *, timeout: float | None, max_output: int
) -> Outcome:
    """Run one async call (its tool's timeout, else `timeout`, cancels it where it awaits);
    every failure becomes an error `Outcome`. `ctx` is None when the tool takes none."""
    tool = item.tool
    limit = tool.timeout if tool.timeout is not None else timeout
    try:
        if limit is None:
            value = await tool.call(dict(item.kwargs), ctx)
        else:
            if ctx is not None:
                ctx.deadline = time.monotonic() + limit
            scope = asyncio.timeout(limit)
            try:
                async with scope:
                    value = await tool.call(dict(item.kwargs), ctx)
            except TimeoutError:
                if not scope.expired():
                    raise  # the tool's own TimeoutError: a failure like any other
                if ctx is not None:
                    ctx.cancelled.set()
                return Outcome(content=timed_out_text(item, limit), is_error=True)
    except Exception as exc:
        return failed(item, exc, max_output)
    except asyncio.CancelledError as exc:  # the tool's own (a task it awaited was cancelled),
        if (task := asyncio.current_task()) is None or task.cancelling():  # or this call's
            raise
        return failed(item, exc, max_output)
    return outcome_of(item, value, max_output)


def call_inline(item: Scheduled, ctx: ToolContext | None, max_output: int) -> Outcome:
    """Run an inline call on the loop, as `execute` would (nothing can time it out)."""
    tool, kwargs = item.tool, item.kwargs
    if tool.context_param is not None:
        kwargs = {**kwargs, tool.context_param: ctx}
    try:
        value = tool.fn(**kwargs)
    except Exception as exc:
        return failed(item, exc, max_output)
    return outcome_of(item, value, max_output)


def timed_out_text(item: Scheduled, limit: float) -> str:
    return f"Tool '{item.tool.name}' timed out after {limit:g}s."


def failed(item: Scheduled, exc: BaseException, max_output: int) -> Outcome:
    """A call that raised: an error result for the model (its text cut at the call's limit, as
    a result's is), and a log record with the traceback for the operator (`ToolError`, a
    message meant for the model, at DEBUG)."""
    level = logging.DEBUG if isinstance(exc, ToolError) else logging.WARNING
    log.log(level, "tool %s (call %s) raised", item.tool.name, item.call.id, exc_info=exc)
    text, cap = valid(str(exc)), cap_of(item, max_output)
    if isinstance(exc, ToolError):
        return Outcome(content=cut(text, cap), is_error=True)
    described = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return Outcome(content=cut(f"Tool '{item.tool.name}' failed: {described}", cap), is_error=True)


def cap_of(item: Scheduled, max_output: int) -> int:
    """Characters of output the call may return: its tool's limit, else the agent's."""
    return item.tool.max_output if item.tool.max_output is not None else max_output


def outcome_of(item: Scheduled, value: Any, max_output: int) -> Outcome:
    """What a call that returned `value` produced, as the model will read it."""
    terminate = is_error = False
    details = None
    if type(value) is str:  # (most tools: text alone, nothing to take apart)
        content, images = valid(value), None
    else:
        if isinstance(value, Suspend | NeedsAnswer):
            return Outcome(content="", suspended=value)
        if isinstance(value, ToolReturn):
            terminate, is_error, details = value.terminate, value.is_error, value.details
            value = value.content
        value, images = split_images(value)  # an image the tool returned goes beside its text
        content = valid(to_content(value))  # a result the log can take (no lone surrogate)
    if images is not None and len(images) > MAX_ATTACHMENTS:  # (each is bounded: `max_bytes`)
        content += f"\n[{len(images) - MAX_ATTACHMENTS} more attachments dropped]"
        images = images[:MAX_ATTACHMENTS]
    tool = item.tool
    name, cap = tool.name, tool.max_output if tool.max_output is not None else max_output
    if details is not None:
        details = json_details(details)
    if len(content) > cap:  # (`cap_of`, without its frame)
        over = over_limit(name, content, cap, is_error, terminate, images)
        return over if details is None else replace(over, details=details)
    return new_outcome(
        content=content, is_error=is_error, terminate=terminate, attachments=images, details=details
    )


def json_details(details: Any) -> Any:
    """A result's `details` as JSON the log keeps (a value with no JSON shape as its text, as
    pydantic would send it; a NaN or an infinity as null)."""
    from pydantic_core import to_jsonable_python

    try:
        return to_jsonable_python(details, fallback=str, inf_nan_mode="null")
    except Exception:  # (a mapping with keys JSON cannot take, a cycle: its text)
        return str(details)


def settled(item: Scheduled, job: Job, max_output: int) -> Outcome:
    """The outcome of a finished thread job."""
    try:
        value = job.result()
    except Exception as exc:
        return failed(item, exc, max_output)
    if value is NOT_STARTED:
        return Outcome(content=NOT_RUN, is_error=True)
    return outcome_of(item, value, max_output)


def result_events(item: Scheduled, outcome: Outcome) -> tuple[Event, ...]:
    """The three events that close a call that ran: raw outcome, model-visible output, status
    (or the one that says it is suspended; the run announces a call's question itself)."""
    call = item.call
    if (waits := outcome.suspended) is not None:
        if isinstance(waits, NeedsAnswer):
            return ()
        pending, session_id = list(waits.pending_ids), waits.session_id
        return (
            ev.ToolSuspended(
                id=call.id, tool=call.name, session_id=session_id, pending_ids=pending
            ),
        )
    return (
        toollane_result(name=call.name, summary=outcome.content),
        tool_output(
            id=call.id,
            tool=call.name,
            content=outcome.content,
            is_error=outcome.is_error,
            attachments=outcome.attachments,
            stored=outcome.stored,
            details=outcome.details,
        ),
        tool_result(
            id=call.id,
            tool=call.name,
            args=item.args,
            detail_text=item.reason,
            status_text="Error." if outcome.is_error else "Approved.",
        ),
    )
