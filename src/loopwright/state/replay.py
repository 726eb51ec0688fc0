"""One reducer for a session's state: what its log means, event by event.

`apply(state, event)` is the only place where an event changes a session's state; `fold(events,
tools)` applies a log in order. The state is the history the model sees (its messages, the usage
and compaction counters), the carry-over, the queued steering and follow-ups (an in-memory
session queues by applying `steering:queued` itself), and the batch still open: the calls of the
last reply with tools, their results so far, which of them started, which were asked about
(announced, tied to their call, decided by `pending:decided`) and which were suspended on a
subagent. A batch joins the history — its results in call order — as soon as every call has its
result. Two views are derived from it on each read, never stored: the checkpoint of a paused
batch (with the decisions recorded) and the recovery of the batch a run that died left
(`continued(state, died=...)` marks a state read from a log whose last run died).

The state is serialisable (`snapshots`): folding the events after a snapshot
into the restored state gives what folding the whole log gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import events as ev
from ..gate.batch import Checkpoint
from ..messages import ToolCall, ToolResultMessage
from ..tools import Tool
from ._values import maker
from .compaction import apply as apply_compaction
from .handoffs import handed_off
from .session_state import Asked, OpenBatch, SessionState, checkpoint


def apply(state: SessionState, event: ev.Event) -> None:
    """Apply one event to the state (events that change nothing are ignored)."""
    handler = HANDLERS.get(type(event))
    if handler is not None:
        handler(state, event)


def fold(
    events: Iterable[ev.Event], tools: Mapping[str, Tool], state: SessionState | None = None
) -> SessionState:
    """Apply events in order: to a fresh state with `tools`, or to `state` (one restored from a
    snapshot keeps the tools it was restored with)."""
    if state is None:
        state = SessionState(tools=tools)
    for event in events:
        apply(state, event)
    return state


def continued(state: SessionState, *, died: bool) -> SessionState:
    """The state a run continues from, read from a log whose last run stopped before its `done`
    (`died`) or not: its `checkpoint` (of a paused batch) or `recovery` (of the batch a dead run
    left) is derived from it. Raises `LookupError` when a paused call's tool no longer exists."""
    state.died = died
    if state.paused and state.batch is not None:  # (its tools looked up now, as it is read)
        checkpoint(state.batch, state.tools)
    return state


def died_waiting(state: SessionState, run: Sequence[ev.Event]) -> list[ev.Event] | None:
    """The events that end a run that died waiting on a human as paused, or None.

    `state` is the session's state from its log and `run` the events since its last run began (its
    `session`); that run stopped before its `done`. It died waiting on a human when its batch
    announced items whose calls have no result, every call of it that started has its result (none
    had half an effect) and none is suspended (an item decided meanwhile, its call not started, is
    taken on by the resumption). Its pause is then what its live approver's deferral would have
    logged: the `actauth:decision` of the approval being asked (unless logged), the step's end,
    `loop:paused` and `done`; the items stay open, and the calls it had not decided yet are decided
    when the batch resumes (`undecided`). Otherwise (None) its batch is recovered (`continued`)."""
    batch, results = state.batch, state.batch.results if state.batch else {}
    if batch is None or state.paused or state.finished or batch.suspended or not run:
        return None
    if run[0].type != "session" or any(c not in results for c in batch.started):
        return None
    if any(i not in batch.asked_call for i in batch.asked):
        return None
    waiting = [i for i in batch.asked if batch.asked_call[i] not in results]  # (decided or not:
    if not waiting:  # a call decided but not started had no effect, its decision takes it on)
        return None
    ending: list[ev.Event] = []
    asking = [i for i, e in enumerate(run) if isinstance(e, ev.ApprovalPending)][-1:]
    if asking and not any(isinstance(e, ev.ActauthDecision) for e in run[asking[0] :]):
        announced = run[asking[0]]
        assert isinstance(announced, ev.ApprovalPending)
        ending.append(
            ev.ActauthDecision(tool=announced.tool, decision="ask", reason=announced.reason)
        )
    steps = [i for i, e in enumerate(run) if isinstance(e, ev.StepStarted | ev.StepFinished)]
    step = run[steps[-1]] if steps else None
    if isinstance(step, ev.StepStarted):  # (a resumed batch is decided outside a step)
        replies = [e for e in run[steps[-1] :] if isinstance(e, ev.MessageCompleted)]
        usage = replies[-1].message.usage if replies else None
        ending.append(ev.StepFinished(step=step.step, usage=usage))
    what = [
        "an answer to a question"
        if isinstance(batch.asked[i], ev.QuestionPending)
        else f"approval of {batch.asked[i].tool}"  # type: ignore[union-attr]
        for i in waiting
    ]
    text = f"Paused: waiting for {', '.join(what)}."
    return [*ending, ev.LoopPaused(pending_ids=waiting), ev.Done(text=text, stop_reason="paused")]


def undecided(paused: Checkpoint) -> list[ToolCall]:
    """The calls of a paused batch that were never decided: none, unless its run died waiting
    on a human before it decided them (`died_waiting`)."""
    asked = {p.request.call.id for p in paused.pending.values()} | set(paused.suspended)
    return [c for c in paused.calls if c.id not in paused.results and c.id not in asked]


# ---- the handlers, by event type ----------------------------------------------------------------


def _input(state: SessionState, event: ev.InputReceived | ev.SteeringInjected) -> None:
    state.carry_over = None
    state.history.append(event.message)


def _note(
    state: SessionState, event: ev.MessageTruncated | ev.OutputInvalid | ev.ContextInjected
) -> None:
    """A cut reply continued, a final answer asked again, a hook's context after a batch: the
    run's note joins the history."""
    if event.message is not None:
        state.history.append(event.message)


def _injected(state: SessionState, event: ev.SteeringInjected) -> None:
    _input(state, event)
    entry, queued = (event.mode, event.message.content), state.queued
    if entry in queued:
        queued.remove(entry)


def _custom(state: SessionState, event: ev.MessageCustom) -> None:
    state.history.append(event.message)
    state.history.customs += 1


def _queued(state: SessionState, event: ev.SteeringQueued) -> None:
    state.queued.append((event.mode, event.text))


def _cleared(state: SessionState, event: ev.SteeringCleared) -> None:
    queued, mode = state.queued, event.mode
    queued[:] = [entry for entry in queued if mode is not None and entry[0] != mode]


def _reply(state: SessionState, event: ev.MessageCompleted) -> None:
    history, message = state.history, event.message
    state.carry_over = None
    state.replies += 1
    history.append(message)
    history.note_usage(message.usage)
    calls = message.tool_calls
    state.batch = OpenBatch.of(calls) if calls else None


def _started(state: SessionState, event: ev.ToolStarted) -> None:
    if (batch := state.batch) is not None:
        batch.started.add(event.id)
        batch.args[event.id] = event.args
        batch.suspended.pop(event.id, None)


def _suspended(state: SessionState, event: ev.ToolSuspended) -> None:
    if (batch := state.batch) is not None:
        batch.suspended[event.id] = event


tool_result = maker(ToolResultMessage)  # (every call's: see `_values.maker`)


def _output(state: SessionState, event: ev.ToolOutput) -> None:
    batch = state.batch
    if batch is None:
        return
    results = batch.results
    results[event.id] = tool_result(
        call_id=event.id,
        tool=event.tool,
        content=event.content,
        is_error=event.is_error,
        attachments=event.attachments,
        details=event.details,
    )
    calls = batch.calls
    if len(results) < len(calls):
        return
    for call in calls:
        if call.id not in results:
            return
    for call in calls:  # the batch closes: its results join the history in call order
        state.history.append(results[call.id])
    state.batch = None


def _asked(state: SessionState, event: Asked) -> None:
    if (batch := state.batch) is not None:
        batch.asked[event.id] = event


def _requested(state: SessionState, event: ev.PendingRequested) -> None:
    if (batch := state.batch) is not None:
        batch.asked_call[event.id] = event.call_id


def _decided(state: SessionState, event: ev.PendingDecided) -> None:
    batch = state.batch
    if batch is not None and event.id in batch.asked:
        batch.decided.setdefault(event.id, event)  # the first decision wins


def _answered(state: SessionState, event: ev.QuestionResolved) -> None:
    if (batch := state.batch) is not None and event.id in batch.asked:
        batch.answers[event.id] = event.answer


def _compacted(state: SessionState, event: ev.CompactionFinished) -> None:
    apply_compaction(state.history, event)


def _aborted(state: SessionState, event: ev.LoopAborted) -> None:
    state.carry_over = event.carry_over
    state.queued.clear()  # a cancel drops what was queued (live, at once: `Run.cancel`)


def _partial(state: SessionState, event: ev.MessagePartial) -> None:
    """The reply's text so far: what its earlier partials gave before `offset`, then `text` (a
    partial at offset 0 replaces the carry-over: the first of a reply, or one of an old log,
    which holds the whole text so far)."""
    state.carry_over = (state.carry_over or "")[: event.offset] + event.text


def _session(state: SessionState, event: ev.Session) -> None:
    state.paused = state.finished = state.died = False  # the new run takes the batch over


def _done(state: SessionState, event: ev.Done) -> None:
    state.finished = True


def _paused(state: SessionState, event: ev.LoopPaused) -> None:
    state.paused = True


HANDLERS: dict[type, Callable[[SessionState, Any], None]] = {
    ev.InputReceived: _input,
    ev.SteeringInjected: _injected,
    ev.MessageTruncated: _note,
    ev.OutputInvalid: _note,
    ev.ContextInjected: _note,
    ev.SteeringQueued: _queued,
    ev.MessageCustom: _custom,
    ev.SteeringCleared: _cleared,
    ev.MessageCompleted: _reply,
    ev.ToolStarted: _started,
    ev.ToolSuspended: _suspended,
    ev.ToolOutput: _output,
    ev.ApprovalPending: _asked,
    ev.QuestionPending: _asked,
    ev.PendingRequested: _requested,
    ev.PendingDecided: _decided,
    ev.QuestionResolved: _answered,
    ev.CompactionFinished: _compacted,
    ev.LoopAborted: _aborted,
    ev.MessagePartial: _partial,
    ev.Session: _session,
    ev.Done: _done,
    ev.LoopPaused: _paused,
    ev.AgentHandoff: handed_off,
}
