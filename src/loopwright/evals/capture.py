"""A stored session as a case (`loopwright eval add`): its first input, its recorded replies as
the case's script (`models.recorded.recorded_script`), its recorded decisions and answers as
the case's `approve` and `answers`, and expectations taken from what happened — the tools
called with their arguments, the gate's decisions, the stop reason and the answer — so the
case passes against today's agent until its behaviour changes.

Only the session's first turn is taken (its first input, through every run that resumed it,
up to the next input).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import events as ev
from ..messages import ToolCall
from ..models.recorded import recorded_script
from .expectations import Happened


def first_turn(events: Sequence[ev.Event]) -> list[ev.Event]:
    """The events of the session's first turn (up to its second `input:received`)."""
    inputs = [i for i, e in enumerate(events) if isinstance(e, ev.InputReceived)]
    return list(events[: inputs[1]] if len(inputs) > 1 else events)


def case_from_events(events: Sequence[ev.Event], agent: str) -> dict[str, Any]:
    """The case (as YAML-able data) that the session `events` of `agent` make. `ValueError`
    for a session with no input or no ending."""
    turn = first_turn(events)
    given = [e for e in turn if isinstance(e, ev.InputReceived)]
    if not given:
        raise ValueError("the session holds no input")
    outcome = Happened.of(turn)
    if outcome.stop_reason is None:
        raise ValueError("the session's first run has not ended")
    case: dict[str, Any] = {"input": given[0].message.content, "agent": agent}
    case["script"] = recorded_script(turn)
    approve, answers = _decided(turn)
    if approve:
        case["approve"] = approve
    if answers:
        case["answers"] = answers
    case["expect"] = _expect(outcome)
    return case


def _decided(events: Sequence[ev.Event]) -> tuple[dict[str, str], dict[str, str]]:
    """What the session's approvals and questions were answered: `{tool: approve|deny}` and
    `{question: answer}`."""
    tools = {e.id: e.tool for e in events if isinstance(e, ev.ApprovalPending)}
    questions = {e.id: e.question for e in events if isinstance(e, ev.QuestionPending)}
    approve: dict[str, str] = {}
    answers: dict[str, str] = {}
    for event in events:
        if not isinstance(event, ev.PendingDecided):
            continue
        if event.id in tools and event.status in ("approved", "denied"):
            approve[tools[event.id]] = "approve" if event.status == "approved" else "deny"
        elif event.id in questions and event.answer is not None:
            answers[questions[event.id]] = event.answer
    return approve, answers


def _expect(outcome: Happened) -> dict[str, Any]:
    expect: dict[str, Any] = {}
    called: list[Any] = []
    for call in outcome.calls:
        entry = _called(call)
        if entry not in called:
            called.append(entry)
    if called:
        expect["called"] = called
    by_tool: dict[str, set[str]] = {}
    for tool, decision in outcome.decisions:
        by_tool.setdefault(tool, set()).add(decision)
    decisions = {t: next(iter(d)) for t, d in by_tool.items() if len(d) == 1}
    if decisions:
        expect["decisions"] = decisions
    expect["stop_reason"] = outcome.stop_reason
    if outcome.answer.strip():
        expect["answer_contains"] = [outcome.answer.strip()]
    return expect


def _called(call: ToolCall) -> dict[str, Any]:
    return {"tool": call.name, "args": call.args} if call.args else {"tool": call.name}
