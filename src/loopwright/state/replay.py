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
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import events as ev
from ..approvals import ApprovalRequest, QuestionRequest
from ..gate.decide import Checkpoint, Pending, Suspended
from ..messages import Recovery, ToolCall, ToolResultMessage
from ..tools import Tool
from ._values import maker
from .compaction import apply as apply_compaction
from .history import History

Asked = ev.ApprovalPending | ev.QuestionPending


@dataclass(slots=True)
class OpenBatch:
    """The calls of the last reply with tools, until each has its result."""

    calls: list[ToolCall]
    results: dict[str, ToolResultMessage] = field(default_factory=dict)
    """Call id → its result, in the order the results came."""
    started: set[str] = field(default_factory=set)
    """Calls whose intent was committed (`tool:started`): they may have had effects."""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Call id → the arguments it last started with (an approver may have edited them)."""
    asked: dict[str, Asked] = field(default_factory=dict)
    """Pending id → its announcement, in the order they were asked."""
    asked_call: dict[str, str] = field(default_factory=dict)
    """Pending id → the call it is about (`pending:requested`)."""
    decided: dict[str, ev.PendingDecided] = field(default_factory=dict)
    """Pending id → the first decision recorded for it."""
    suspended: dict[str, ev.ToolSuspended] = field(default_factory=dict)
    """Call id → what it waits on, until it starts again."""
    answers: dict[str, str] = field(default_factory=dict)
    """Pending id → the answer to a question, as the run took it (`question:resolved`)."""
    checked: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Pending id → the (arguments, validated values) a run of this process checked live for
    a call it paused on (`decide.Pending.checked`): a cache the log does not hold, never
    snapshotted; the checkpoint's items carry it."""


Queue = list[tuple[Literal["steer", "follow_up"], str]]


@dataclass(slots=True)
class SessionState:
    """A session's state as its log defines it (see the module docstring)."""

    tools: Mapping[str, Tool] = field(default_factory=dict, compare=False, repr=False)
    """The agent's tools by name, for the checkpoint of a paused batch."""
    history: History = field(default_factory=History)
    batch: OpenBatch | None = None
    paused: bool = False
    """The last run ended with `loop:paused`."""
    finished: bool = False
    """The last run reached its `done`."""
    carry_over: str | None = None
    """A note for the next run about a reply that was cut off (SPEC §3.9)."""
    queued: Queue = field(default_factory=list)
    """Steering and follow-up messages sent and not delivered yet, oldest first."""
    died: bool = False
    """The last run's process stopped before its `done` (its lease expired): known when the
    state is read from its log (`continued`), not from its events; the next run clears it."""

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The paused batch as a run resumes it: a view of `batch`, derived on each read
        (`LookupError` when a paused call's tool no longer exists)."""
        batch = self.batch
        return checkpoint(batch, self.tools) if batch is not None and self.paused else None

    @property
    def recovery(self) -> Recovery | None:
        """The unfinished batch of a run that died (derived on each read), or None."""
        if not self.died or self.finished or (self.paused and self.batch is not None):
            return None
        batch = self.batch
        return Recovery(
            calls=batch.calls if batch else [],
            results=dict(batch.results) if batch else {},
            started=set(batch.started) if batch else set(),
            args=dict(batch.args) if batch else {},
        )


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


def _note(state: SessionState, event: ev.MessageTruncated | ev.OutputInvalid) -> None:
    """A cut reply continued, or a final answer asked again: the run's note joins the history."""
    if event.message is not None:
        state.history.append(event.message)


def _injected(state: SessionState, event: ev.SteeringInjected) -> None:
    _input(state, event)
    entry, queued = (event.mode, event.message.content), state.queued
    if entry in queued:
        queued.remove(entry)


def _queued(state: SessionState, event: ev.SteeringQueued) -> None:
    state.queued.append((event.mode, event.text))


def _cleared(state: SessionState, event: ev.SteeringCleared) -> None:
    queued, mode = state.queued, event.mode
    queued[:] = [entry for entry in queued if mode is not None and entry[0] != mode]


def _reply(state: SessionState, event: ev.MessageCompleted) -> None:
    history, message = state.history, event.message
    state.carry_over = None
    history.append(message)
    history.note_usage(message.usage)
    calls = message.tool_calls
    state.batch = OpenBatch(calls) if calls else None


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
    ev.SteeringQueued: _queued,
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
}


# ---- the checkpoint of a paused batch -----------------------------------------------------------


def checkpoint(batch: OpenBatch, tools: Mapping[str, Tool]) -> Checkpoint:
    """A paused batch as the run resumes it, a view of the batch (whose recorded decisions its
    items read): its pending items and its suspended calls, each with its tool looked up by
    name (`LookupError` when it is gone)."""
    calls = {c.id: c for c in batch.calls}
    pending: dict[str, Pending] = {}
    for pending_id, announced in batch.asked.items():
        call = calls[batch.asked_call[pending_id]]
        waits = batch.suspended.get(call.id)
        if call.id in batch.results or (
            call.id in batch.started and (waits is None or pending_id not in waits.pending_ids)
        ):
            continue  # decided before the pause (it ran, or runs again as a suspended call)
        tool = tools.get(call.name)
        if tool is None:
            raise LookupError(f"tool {call.name!r} of a paused call no longer exists")
        request = _request(pending_id, call, announced, tool)
        checked = batch.checked.get(pending_id)
        pending[pending_id] = Pending(request, tool, checked, decided=batch.decided)
    suspended = {}
    for call_id, waits in batch.suspended.items():
        tool = tools.get(waits.tool)
        if tool is None:
            raise LookupError(f"tool {waits.tool!r} of a suspended call no longer exists")
        args = batch.args.get(call_id, calls[call_id].args)
        answers = {  # of the questions it asked in earlier pauses of this batch
            announced.question: batch.answers[pending_id]
            for pending_id, announced in batch.asked.items()
            if batch.asked_call.get(pending_id) == call_id and pending_id in batch.answers
            if isinstance(announced, ev.QuestionPending)
        }
        suspended[call_id] = Suspended(
            calls[call_id], tool, args, waits.session_id, list(waits.pending_ids), answers
        )
    return Checkpoint(
        calls=batch.calls,
        results=batch.results,  # (the batch's own: a view, as its decisions are)
        pending=pending,
        decided=batch.decided,
        suspended=suspended,
    )


def _request(
    pending_id: str, call: ToolCall, announced: Asked, tool: Tool
) -> ApprovalRequest | QuestionRequest:
    if isinstance(announced, ev.QuestionPending):
        return QuestionRequest(
            id=pending_id,
            call=call,
            question=announced.question,
            options=announced.options,
            agent=announced.agent,
            session_id=announced.session_id or "",
            requested_at=announced.requested_at,
        )
    return ApprovalRequest(
        id=pending_id,
        call=call,
        args=announced.args,
        parameters=tool.parameters,
        scope=announced.scope,
        reason=announced.reason,
        requested_at=announced.requested_at,
    )
