"""Replay a stored session against today's agent, and say what changed.

    report = await replay_session(agent, stored)      # events, or the `StoredEvent`s of a log
    report = replay(agent, read_recording("s1.jsonl"))   # the same, without an event loop
    print(report.render()); assert report.ok

The session's inputs go in again, turn by turn (`trace.turns_of`), through today's agent — its
code, prompt, rules, tools and hooks — in a new in-memory session (nothing is stored): each
turn's input, its steering and follow-ups at the step boundaries where they entered (after as
many model replies as they did), and the human decisions it recorded. The recorded model replies
of the turn stand in for the model (`models.recorded`), so a replay is offline and
deterministic; with `model=` ("provider:model" or a `Model`) a live model answers instead.

Decisions are handed back by position and tool: the replay's n-th ask about tool T gets the
answer the recording gave its n-th ask about T (approve, deny, approve with edited arguments,
an answer to a question; none when the recording was left paused on it: the replay pauses
too). An ask the recording never made (a rule turned `allow` into `ask`) is denied — reported
as a changed decision, with `approval: unrecorded` — and a question it never asked pauses the
replay there; turns after a pause are not replayed. A turn that needs more replies than the
recording holds ends with `loop:error` (`script exhausted`), a changed stop reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import events as ev
from ..agent import Agent
from ..approvals import DEFER, Answer, Approval, ApproverResult, QuestionRequest, Request
from ..errors import SessionBusy
from ..loop.session import Run, Session
from ..models import Model, ModelFailure, ModelRequest, StreamItem
from ..models.recorded import recorded_model
from ..models.registry import get_model
from ..models.scripted import Reply
from ..store.export import read_jsonl
from ..store.records import StoredEvent
from .report import ReplayReport, compare
from .trace import CallTrace, Tracer, TurnTrace, turns_of

UNRECORDED = "replay: the recording holds no decision for this call"


class RecordingError(ValueError):
    """The events given are not a session's log (a bad file, no input)."""


def read_recording(path: str | Path) -> list[StoredEvent]:
    """A session exported as JSON lines (`loopwright sessions export`), as stored events."""
    source = Path(path)
    try:
        with source.open() as lines:
            stored = read_jsonl(lines)
    except OSError as exc:
        raise RecordingError(f"cannot read {source}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:  # (JSON, a line's shape, an event's)
        raise RecordingError(f"{source} is not an exported session: {exc}") from None
    if not stored:
        raise RecordingError(f"{source} holds no events")
    return stored


async def replay_session(
    agent: Agent,
    events: Iterable[ev.Event | StoredEvent],
    *,
    model: str | Model | None = None,
    tenant: str = "default",
) -> ReplayReport:
    """Run the session `events` record against `agent` and report what changed (see the
    module). `RecordingError` when they hold no input."""
    given = [e.event if isinstance(e, StoredEvent) else e for e in events]
    recorded = turns_of(given)
    if not any(t.input is not None for t in recorded):
        raise RecordingError("the events hold no input (input:received): nothing to replay")
    session_id = next((e.session_id for e in given if isinstance(e, ev.Session)), None)
    stand = Stand(None if model is None else get_model(model))
    today = replace(agent, model=stand, fallback_models=())
    session = Session(today, session_id=session_id, tenant=tenant, observers=())
    replayed: list[TurnTrace | None] = []
    try:
        for turn in recorded:
            stopped = bool(replayed) and (replayed[-1] is None or bool(session.pending))
            replayed.append(None if stopped else await _turn(session, stand, turn))
    finally:
        await session.toolsets.exit_all()
    return ReplayReport(
        session_id=session_id,
        agent=agent.name,
        model=stand.name,
        turns=len(recorded),
        calls=sum(len(t.calls) for t in replayed if t is not None),
        changes=tuple(compare(recorded, replayed)),
        inputs=tuple(t.input.content if t.input is not None else "" for t in recorded),
    )


def replay(
    agent: Agent, events: Iterable[ev.Event | StoredEvent], *, model: str | Model | None = None
) -> ReplayReport:
    """`replay_session` for code without an event loop (a test, a script)."""
    return asyncio.run(replay_session(agent, events, model=model))


async def _turn(session: Session, stand: Stand, turn: TurnTrace) -> TurnTrace | None:
    answers = Answers(turn.calls)

    def deliver(replies: int) -> None:  # what entered after this many replies, queued now
        for after, injected in turn.steering:
            if after == replies:
                queue = session.steer if injected.mode == "steer" else session.follow_up
                queue(injected.message.content)

    stand.begin(recorded_model(turn.events).replies, deliver)
    deliver(0)
    try:
        run = _start(session, turn, answers)
    except (ValueError, SessionBusy):  # (nothing to continue from, or still paused)
        session.clear_queue()
        return None
    trace = TurnTrace(turn.input, turn.kind)
    tracer = Tracer(trace)
    async with run:
        async for event in run:
            tracer.read(event)
    session.clear_queue()  # (steering the replay never reached stays out of the next turn)
    for call in trace.calls:
        if call.id in answers.unrecorded:
            call.human = "unrecorded"
    return trace


def _start(session: Session, turn: TurnTrace, answers: Answers) -> Run:
    if turn.kind == "compact":
        return session.compact()
    given = turn.input
    text = given.content if given is not None and not given.attachments else given
    return session.run(text, approver=answers)


class Answers:
    """The approver of a replayed turn: the recording's answers, by position and tool."""

    def __init__(self, calls: Sequence[CallTrace]) -> None:
        self.asked = [c for c in calls if c.kind is not None]
        self.unrecorded: set[str] = set()
        """The ids of the calls the recording holds no answer for."""

    def __call__(self, request: Request) -> ApproverResult:
        kind = "question" if isinstance(request, QuestionRequest) else "approval"
        for call in self.asked:
            if call.kind == kind and call.tool == request.call.name:
                self.asked.remove(call)
                answer: Approval | Answer | None = call.outcome
                return DEFER if answer is None else answer
        self.unrecorded.add(request.call.id)
        return Approval.deny(UNRECORDED, by="replay") if kind == "approval" else DEFER


class Stand:
    """The model a replay's runs ask: the turn's recorded replies in order (or a live model),
    telling the replay each time a reply is asked for, so what entered after it is queued."""

    def __init__(self, live: Model | None) -> None:
        self.live = live
        self._replies: list[Reply] = []
        self._served = 0
        self._asked: Callable[[int], None] = lambda served: None

    @property
    def name(self) -> str:
        return "recorded" if self.live is None else self.live.name

    @property
    def native_output(self) -> bool:
        return self.live is None or bool(getattr(self.live, "native_output", False))

    def begin(self, replies: list[Reply], asked: Callable[[int], None]) -> None:
        self._replies, self._served, self._asked = replies, 0, asked

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self._served += 1
        self._asked(self._served)
        if self.live is not None:
            return self.live.stream(request)
        if self._served > len(self._replies):
            return _exhausted(len(self._replies))
        return self._replies[self._served - 1].stream(request, "scripted:recorded")

    def __getattr__(self, name: str) -> Any:  # a live model's window, its server's look-up
        if self.live is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.live, name)


async def _exhausted(count: int) -> AsyncIterator[StreamItem]:
    yield ModelFailure(error=f"script exhausted: the recording's {count} replies were used")
