"""One reducer for a session's state: what its log means, event by event.

`apply(state, event)` is the only place where an event changes a session's state; `fold(events,
tools)` applies a log in order. The state is the history the model sees (messages, carry-over,
queued steering, the usage and compaction counters) and the batch still open: the calls of the
last reply with tools, their results so far, which of them started, which were asked about
(announced, tied to their call, decided by `pending:decided`) and which were suspended on a
subagent. A batch joins the history — its results in call order — as soon as every call has its
result. `continued(state, died=...)` gives the history a run continues from: the checkpoint of a
paused batch (with the decisions recorded), or the recovery of the batch a dead run left.

The state is serialisable (`to_snapshot` / `from_snapshot`): folding the events after a snapshot
into the restored state gives what folding the whole log gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from .. import redact
from ..approvals import ApprovalRequest, QuestionRequest
from ..gate.decide import Checkpoint, Pending, Suspended
from ..messages import AssistantMessage, Message, Recovery, ToolCall, ToolResultMessage
from ..tools import Tool
from ..wire import loads, messages_from_json, messages_to_json, to_dict
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


def continued(state: SessionState, *, died: bool) -> History:
    """The history a run continues from: the state's history with the checkpoint of a paused
    batch, or — when the last run's process stopped before its `done` (`died`) — the recovery
    of its unfinished batch. Both are derived (set here, cleared by the next run's `session`).
    Raises `LookupError` when a paused call's tool no longer exists."""
    history, batch = state.history, state.batch
    history.checkpoint = history.recovery = None
    if batch is not None and state.paused:
        history.checkpoint = checkpoint(batch, state.tools)
    elif died and not state.finished:
        history.recovery = Recovery(
            calls=batch.calls if batch else [],
            results=dict(batch.results) if batch else {},
            started=set(batch.started) if batch else set(),
            args=dict(batch.args) if batch else {},
        )
    return history


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
    history = state.history
    history.carry_over = None
    history.append(event.message)


def _note(state: SessionState, event: ev.MessageTruncated | ev.OutputInvalid) -> None:
    """A cut reply continued, or a final answer asked again: the run's note joins the history."""
    if event.message is not None:
        state.history.append(event.message)


def _injected(state: SessionState, event: ev.SteeringInjected) -> None:
    _input(state, event)
    entry, queued = (event.mode, event.message.content), state.history.queued
    if entry in queued:
        queued.remove(entry)


def _queued(state: SessionState, event: ev.SteeringQueued) -> None:
    state.history.queued.append((event.mode, event.text))


def _cleared(state: SessionState, event: ev.SteeringCleared) -> None:
    queued, mode = state.history.queued, event.mode
    queued[:] = [entry for entry in queued if mode is not None and entry[0] != mode]


def _reply(state: SessionState, event: ev.MessageCompleted) -> None:
    history, message = state.history, event.message
    history.carry_over = None
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
    state.history.carry_over = event.carry_over
    state.history.queued.clear()  # a cancel drops what was queued, as it does live


def _partial(state: SessionState, event: ev.MessagePartial) -> None:
    """The reply's text so far: what its earlier partials gave before `offset`, then `text` (a
    partial at offset 0 replaces the carry-over: the first of a reply, or one of an old log,
    which holds the whole text so far)."""
    history = state.history
    history.carry_over = (history.carry_over or "")[: event.offset] + event.text


def _session(state: SessionState, event: ev.Session) -> None:
    state.paused = state.finished = False
    state.history.checkpoint = state.history.recovery = None  # the new run takes them over


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
        pending[pending_id] = Pending(request=request, tool=tool, decided=batch.decided)
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


# ---- snapshots -------------------------------------------------------------------------------------

_HEAD = '{"version":1,"state":'
_MESSAGES = ',"messages":'


def to_snapshot(state: SessionState) -> str:
    """The state as one JSON object: `{"version": 1, "state": {...}, "messages": [...]}`.

    `messages` (wire form) holds the history's messages, then — while a batch is open — one
    assistant message holding its calls and the results it has so far; `state` holds the rest.
    The derived checkpoint and recovery are not kept (`continued` derives them again)."""
    history, batch = state.history, state.batch
    messages: list[Message] = list(history.messages)
    head: dict[str, Any] = {
        "history": len(messages),
        "carryOver": history.carry_over,
        "chars": history.chars,
        "reportedTokens": history.reported_tokens,
        "charsAtReport": history.chars_at_report,
        "compactedAt": history.compacted_at,
        "queued": [list(entry) for entry in history.queued],
        "paused": state.paused,
        "finished": state.finished,
        "batch": None,
    }
    if batch is not None:
        messages.append(AssistantMessage(parts=tuple(batch.calls)))
        messages += batch.results.values()
        head["batch"] = {
            "started": sorted(batch.started),
            "args": batch.args,
            "asked": [to_dict(e) for e in batch.asked.values()],
            "askedCall": batch.asked_call,
            "decided": [to_dict(e) for e in batch.decided.values()],
            "suspended": [to_dict(e) for e in batch.suspended.values()],
            "answers": batch.answers,
        }
    body = redact.json_text(json.dumps(head, ensure_ascii=False, separators=(",", ":")))  # (P11)
    return f"{_HEAD}{body}{_MESSAGES}{messages_to_json(messages)}}}"


def from_snapshot(data: str, tools: Mapping[str, Tool]) -> SessionState:
    """The state `to_snapshot` wrote, with `tools` (looked up by name when a paused batch's
    checkpoint is derived). `ValueError` for anything else, such as another version."""
    try:
        return _restore(data, tools)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a version 1 session snapshot ({exc!r})") from None


def _restore(data: str, tools: Mapping[str, Tool]) -> SessionState:
    if not (data.startswith(_HEAD) and data.endswith("}")):
        raise ValueError("not a version 1 session snapshot")
    head, end = json.JSONDecoder().raw_decode(data, len(_HEAD))
    if not data.startswith(_MESSAGES, end):
        raise ValueError("not a version 1 session snapshot")
    messages = messages_from_json(data[end + len(_MESSAGES) : -1])
    count = head["history"]
    history = History(
        messages=messages[:count],
        carry_over=head["carryOver"],
        chars=head["chars"],
        reported_tokens=head["reportedTokens"],
        chars_at_report=head["charsAtReport"],
        compacted_at=head["compactedAt"],
        queued=[(mode, text) for mode, text in head["queued"]],
    )
    state = SessionState(
        tools=tools, history=history, paused=head["paused"], finished=head["finished"]
    )
    saved = head["batch"]
    if saved is not None:
        reply = messages[count]
        if not isinstance(reply, AssistantMessage):
            raise ValueError("not a version 1 session snapshot (no open batch's calls)")
        results = [m for m in messages[count + 1 :] if isinstance(m, ToolResultMessage)]
        state.batch = OpenBatch(
            calls=reply.tool_calls,
            results={m.call_id: m for m in results},
            started=set(saved["started"]),
            args=saved["args"],
            asked={e.id: e for e in _events(saved["asked"])},
            asked_call=saved["askedCall"],
            decided={e.id: e for e in _events(saved["decided"])},
            suspended={e.id: e for e in _events(saved["suspended"])},
            answers=saved.get("answers", {}),  # (a snapshot written before answers were kept)
        )
    return state


def _events(items: list[dict[str, Any]]) -> list[Any]:
    return [loads(item) for item in items]
