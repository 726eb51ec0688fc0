"""What a session did, turn by turn, as a replay compares it.

A turn is what one input set going: its run, and every run that resumed it after a pause (with
the decisions logged between them). `turns_of(events)` cuts a stored session's log into turns;
`Tracer` reads the events of one turn — recorded or replayed — into a `TurnTrace`: the calls the
model made (tool, arguments), the gate's decision on each (`allow`, `ask`, `deny`), what a human
said to it, its result, the final answer and the stop reason. A run with no input that does not
resume a paused one (one continued after steering, a manual compaction) is a turn of its own.

Calls are matched by position: the n-th call of a turn (in model order) is compared with the
n-th call of the same turn. The verdict on a call is `ask` whenever a human was asked about it
(an approval, or a question: `pending:requested`), whatever the human said (that is `human`);
a paused call's second `actauth:decision`, logged as its run resumes, finds it out of its
batch already and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import events as ev
from ..approvals import Answer, Approval
from ..messages import ToolCall, UserMessage

Human = Literal["approved", "edited", "denied", "answered", "unrecorded"]
"""What a human said to an asked call (`unrecorded`: the replay asked where the recording never
did, and denied the call, or paused on the question)."""


@dataclass(slots=True)
class CallTrace:
    """One tool call of a turn, as far as it went."""

    id: str
    tool: str
    args: dict[str, Any]
    decision: ev.DecisionKind | None = None
    human: Human | None = None
    """None: nobody was asked, or the question is still open."""
    outcome: Approval | Answer | None = None
    """The human's answer as the replay hands it back (the recording's)."""
    content: str | None = None
    is_error: bool | None = None
    kind: Literal["approval", "question"] | None = None


@dataclass(slots=True)
class TurnTrace:
    """One turn: its input, its calls, and how it ended."""

    input: UserMessage | None
    kind: Literal["input", "continue", "compact"] = "input"
    calls: list[CallTrace] = field(default_factory=list)
    answer: str | None = None
    stop_reason: ev.RunStopReason | None = None
    events: list[ev.Event] = field(default_factory=list)
    """The turn's own events (the recorded model and the steering plan are read from them)."""
    steering: list[tuple[int, ev.SteeringInjected]] = field(default_factory=list)
    """Steering and follow-ups, each with the model replies the turn had before it entered."""


class Tracer:
    """Reads one turn's events, in order, into `trace`."""

    def __init__(self, trace: TurnTrace) -> None:
        self.trace = trace
        self._by_id: dict[str, CallTrace] = {}
        self._batch: list[CallTrace] = []  # the latest reply's calls, awaiting their verdicts
        self._items: dict[str, CallTrace] = {}  # pending item id → its call
        self._replies = 0

    def read(self, event: ev.Event) -> None:
        trace = self.trace
        trace.events.append(event)
        match event:
            case ev.MessageCompleted(message=message):
                self._replies += 1
                calls = [p for p in message.parts if isinstance(p, ToolCall)]
                self._batch = [CallTrace(c.id, c.name, dict(c.args)) for c in calls]
                trace.calls += self._batch
                self._by_id.update((c.id, c) for c in self._batch)
            case ev.CompactionFinished(summary=summary) if summary is not None:
                self._replies += 1
            case ev.SteeringInjected():
                trace.steering.append((self._replies, event))
            case ev.ActauthDecision(tool=tool, decision=decision):
                waiting = [c for c in self._batch if c.tool == tool]  # (model order, by tool)
                if waiting:
                    self._batch.remove(call := waiting[0])
                    call.decision = "ask" if call.kind is not None else decision
            case ev.PendingRequested(id=item, call_id=call_id, kind=kind):
                if (asked := self._by_id.get(call_id)) is not None:
                    asked.kind, asked.decision = kind, "ask"
                    self._items[item] = asked
            case ev.ApprovalResolved(id=item, decision=said, by=by, args=args, reason=reason):
                self._decided(item, "approved" if said == "approve" else "denied", by, args, reason)
            case ev.QuestionResolved(id=item, answer=answer, by=by):
                self._answered(item, answer, by)
            case ev.PendingDecided(id=item, status=status, by=by, args=args, reason=reason):
                if status == "answered":
                    self._answered(item, event.answer or "", by)
                elif status in ("approved", "denied"):
                    self._decided(item, status, by, args, reason)
            case ev.ToolOutput(id=call_id, content=content, is_error=is_error):
                if (ran := self._by_id.get(call_id)) is not None:
                    ran.content, ran.is_error = content, is_error
            case ev.Done(text=text, stop_reason=reason):
                trace.answer, trace.stop_reason = text, reason
            case _:
                pass

    def _decided(
        self, item: str, status: str, by: str, args: dict[str, Any] | None, reason: str | None
    ) -> None:
        call = self._items.get(item)
        if call is None:
            return
        if status == "approved":
            call.human = "edited" if args is not None else "approved"
            call.outcome = Approval.approve(args, by=by)
        else:
            call.human, call.outcome = "denied", Approval.deny(reason, by=by)

    def _answered(self, item: str, answer: str, by: str) -> None:
        if (call := self._items.get(item)) is not None:
            call.human, call.outcome = "answered", Answer(text=answer, by=by)


def turns_of(events: Iterable[ev.Event]) -> list[TurnTrace]:
    """A stored session's log, cut into turns (see the module)."""
    runs: list[list[ev.Event]] = []
    for event in events:
        if isinstance(event, ev.MessagePartial):
            continue  # (stored only: what a reply had streamed so far)
        if isinstance(event, ev.Session) or not runs:
            runs.append([])
        runs[-1].append(event)
    turns: list[TurnTrace] = []
    tracer: Tracer | None = None
    for run in runs:
        given = next((e.message for e in run if isinstance(e, ev.InputReceived)), None)
        resumes = tracer is not None and tracer.trace.stop_reason == "paused"
        if tracer is None or given is not None or not resumes:
            compact = given is None and any(
                isinstance(e, ev.CompactionStarted) and e.reason == "manual" for e in run
            )
            kind: Literal["input", "continue", "compact"] = (
                "input" if given is not None else "compact" if compact else "continue"
            )
            tracer = Tracer(TurnTrace(given, kind))
            turns.append(tracer.trace)
        for event in run:
            tracer.read(event)
    return turns
