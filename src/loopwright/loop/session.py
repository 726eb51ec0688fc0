"""Sessions and runs: the Python way to drive the loop.

A `Session` is one conversation with one agent; it holds its state (`SessionState`: the history,
the queue, the batch still open), which each event of its runs changes as it goes by (the
reducer, `replay.apply`, its only writer), and runs one input at a time. `session.run(text)`
returns a `Run`: the loop runs in a task the run owns, and its events reach the caller through
a buffer; `steer`, `follow_up`, `clear_queue` and `cancel` work from anywhere while it runs,
cancelling is cancelling that task, and any task may `await session.idle()` until no run is in
progress. Leaving an `async with` block early cancels the run. A `Journal` (the store seam) sees every event, in the run's task, before
the loop goes on; `loopwright.store` implements it durably.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from .. import events as ev
from ..agent import Agent
from ..approvals import Answer, Approval, ApprovalRequest, Approver, QuestionRequest, now_iso
from ..attachments import Attachment
from ..errors import SessionBusy, UnknownPending
from ..gate.batch import Checkpoint, Pending, Resolution
from ..gate.permissions import Gate
from ..gate.rulebook import Edits, Item, Refusal, applied, outcome, recorded, rule
from ..hooks import RunInfo, deployment
from ..messages import Message, ToolResultMessage, UserMessage
from ..model_settings import ModelSettings, resolve
from ..models.model_inputs import with_attachments
from ..models.registry import get_model
from ..state._values import maker
from ..state.history import History
from ..state.replay import apply
from ..state.session_state import SessionState
from ..telemetry import observers as default_observers
from ..toolsets import Toolsets
from . import fallback
from .driver import Run as Run
from .driver import RunResult as RunResult
from .loop import run_loop
from .observers import Observer
from .queueing import Queued as Queued
from .queueing import Queueing
from .steps import Steps
from .threads import Signal


class Journal(Protocol):
    """Where a run's events go before the loop continues (the store's seam).

    `begin` claims the session for the run (and may refresh `session.state` in place from the
    log); `append` must make the event durable (or fail) before it returns when it is a commit
    point — the loop is suspended until it does, so an intent is recorded before its tool runs —
    and returns the event's sequence number in the log, or None when it is not committed (yet)
    or never logged; `end` releases the claim.
    All three are called in the run's task. `resolve` records a human's answer to a pending
    item durably.
    """

    async def begin(self, session: Session, input: str | None) -> None: ...

    async def append(self, session_id: str, event: ev.Event) -> int | None: ...

    async def end(self, session: Session, stop_reason: ev.RunStopReason | None) -> None: ...

    def seq_of(self, event: ev.Event) -> int | None:
        """The sequence number of an event of the run that the log holds (None: not yet)."""
        ...

    async def resolve(
        self, session: Session, pending_id: str, approval: Approval | Answer
    ) -> Resolution: ...

    async def child(self, parent: Session, agent: Agent, session_id: str) -> Session:
        """A child session (a subagent's) kept in the same place, with its state if it exists."""
        ...

    def record(self, event: ev.Event, *, between_runs: bool = False) -> bool:
        """Commit an event from outside the run (a steering message sent to it) while the run
        holds the session: False (nothing done) when no run does any more. `between_runs` (a
        queue cleared for the next run): also when none does, under a claim of its own."""
        ...

    def live(self, approver: Approver) -> Approver:
        """The approver a run of this session asks: one that answers with the decision the
        store records first, so a decision made elsewhere meanwhile overtakes it (one
        authority per pending item). Journals without one return `approver` as it is."""
        ...


run_info = maker(RunInfo)  # (every run's: see `_values.maker`)


class Session(Queueing):
    """One conversation with one agent; one run at a time (what it queues for its runs:
    `queueing.Queueing`)."""

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        tenant: str = "default",
        environment: str | None = None,
        history: History | None = None,
        journal: Journal | None = None,
        observers: Sequence[Observer] | None = None,
        toolsets: Toolsets | None = None,
    ) -> None:
        """`observers` see every event of its runs (None: the process's default as the session
        is made, `telemetry.observers()`); `toolsets` enters its agent's live toolsets (None:
        one of its own, made on first use: exit it with `await session.toolsets.exit_all()`)."""
        self.agent = agent
        self.id = session_id or os.urandom(16).hex()  # (what secrets.token_hex(16) makes)
        self.tenant = tenant
        self.environment = environment or deployment()
        self.state = SessionState(tools=agent._by_name, history=history or History())
        """The session's state: what its events made of it (`replay`), its history first."""
        self.journal: Journal | None = journal
        self._signals: set[Signal] = set()  # the stop signals of its run's calls in flight
        self._unlogged: list[ev.SteeringQueued] = []  # (see `unlogged`)
        self._run: Run | None = None
        self._idle: list[asyncio.Future[None]] = []  # tasks waiting in `idle()`
        self._gate = agent.gate()
        self._children: dict[str, Session] = {}
        self.observers = default_observers() if observers is None else tuple(observers)
        self._toolsets = toolsets

    @property
    def toolsets(self) -> Toolsets:
        """The owner of the live toolsets its runs enter (its subagents' sessions share it)."""
        if self._toolsets is None:
            self._toolsets = Toolsets()
        return self._toolsets

    @property
    def history(self) -> History:
        return self.state.history

    @property
    def messages(self) -> list[Message]:
        return self.history.messages

    def compact(self) -> Run:
        """Compact the history now (SPEC §6, on demand); iterate or drain the returned run."""
        return self.run(None, compact=True)

    def run(
        self,
        input: str | UserMessage | None = None,
        *,
        approver: Approver | None = None,
        compact: bool = False,
        settings: ModelSettings | Mapping[str, Any] | None = None,
        attachments: Sequence[Attachment | str | Path | bytes] = (),
    ) -> Run:
        """Start processing `input` (text, or a `UserMessage` whose content is the input);
        iterate the returned `Run` for its events.

        Without an input the run continues the history from where it is: that needs a valid
        point to continue from (a history ending in a user message or tool results, a
        carry-over note, queued steering, a paused or interrupted batch), else `ValueError`.
        `approver` answers `ask` decisions live; without one they become pending items and the
        run pauses. `settings` are model settings laid over the agent's for this run only.
        `attachments` (images, documents: `Attachment` values, file paths, URLs or bytes) go
        with the input (see `loopwright.attachments`).
        Raises `SessionBusy` while another run of this session is in progress, and
        `ConfigError` when the model cannot take the settings or the attachments (before any
        request; `AttachmentError` for a bad or oversized attachment).
        """
        if input is not None and not isinstance(input, (str, UserMessage)):
            raise TypeError(f"a run's input is a str or a UserMessage, not {type(input).__name__}")
        if attachments or not isinstance(input, str):  # (a plain text input stays as it is)
            input = with_attachments(input, attachments, self.agent.model)
        if self.busy:
            raise SessionBusy(
                f"session {self.id} is already running (a run left unfinished stays running: "
                "iterate it to the end, use `async with session.run(...)`, or `await run.aclose()`)"
            )
        checkpoint = self.state.checkpoint
        if input is not None and checkpoint is not None:
            ids = ", ".join(p.request.id for p in checkpoint.pending.values() if p.decision is None)
            raise SessionBusy(
                f"session {self.id} is paused on pending items ({ids}): resolve them, then resume()"
            )
        if input is None and checkpoint is not None and self.pending:
            raise SessionBusy(f"session {self.id} still has {len(self.pending)} open items")
        if input is None and not compact:
            self._check_continuable()
        if approver is not None and self.journal is not None:
            approver = self.journal.live(approver)
        model = get_model(self.agent.model)
        own = ModelSettings.parse(settings)
        fallback.check(  # the model's and the fallback models' (fallback.py)
            self.agent, model, resolve(own.over(self.agent.settings), self.agent.max_output_tokens)
        )
        info = run_info(
            session_id=self.id,
            tenant=self.tenant,
            environment=self.environment,
            agent=self.agent.name,
            settings=own,
        )
        if self._children:  # keep only the subagents the paused batch waits on
            waiting = {s.session_id for s in checkpoint.suspended.values()} if checkpoint else ()
            self._children = {k: v for k, v in self._children.items() if k in waiting}
        steps = partial(
            Steps,
            self.agent,
            model,
            self._gate,
            self.state,
            info,
            self._signals,
            approver,
            self,
        )
        events = run_loop(steps, input, compact)
        text = input.content if isinstance(input, UserMessage) else input
        journal = self.journal
        self._run = Run(
            events,
            self._signals,
            self.id,
            journal,
            self,
            partial(journal.begin, self, text) if journal is not None else None,
            partial(journal.end, self) if journal is not None else None,
            self.agent._output,
            self.observers,
            partial(self.toolsets.enter_all, self.agent._live) if self.agent._live else None,
        )
        return self._run

    def _check_continuable(self) -> None:
        """A run without input needs something for the model to answer (pi-agent-core's
        `continue()` refuses the same states)."""
        state = self.state
        if (state.paused and state.batch is not None) or state.recovery is not None:
            return
        if state.carry_over or any(mode == "steer" for mode, _ in state.queued):
            return
        messages = state.history.messages
        tail = messages[-1] if messages else None
        if isinstance(tail, (UserMessage, ToolResultMessage)):
            return
        where = "its history is empty" if tail is None else "its history ends with a reply"
        raise ValueError(
            f"session {self.id} has nothing to continue from: {where} (give the run an input, "
            "or steer() before running without one)"
        )

    def _ended(self, run: Run) -> None:
        """A run's task has ended: whoever waits in `idle()` looks again."""
        waiting, self._idle = self._idle, []
        for future in waiting:
            if not future.done():
                future.set_result(None)

    async def idle(self) -> None:
        """Return once no run of this session is in progress (at once when none is): from any
        task, without driving the run. A run started meanwhile is waited for too."""
        while self.busy:
            assert self._run is not None
            self._run.watch(self._ended)  # its end wakes this task
            future = asyncio.get_running_loop().create_future()
            self._idle.append(future)
            try:
                await future
            finally:
                if future in self._idle:
                    self._idle.remove(future)

    async def child(self, agent: Agent, session_id: str) -> Session:
        """The session of a subagent's call: kept by this session (in the store when this one
        is durable), so that a run paused inside it resumes with its parent."""
        if self.journal is not None:
            child = await self.journal.child(self, agent, session_id)
        else:
            child = self._children.get(session_id) or Session(
                agent,
                session_id=session_id,
                tenant=self.tenant,
                environment=self.environment,
                observers=self.observers,
                toolsets=self.toolsets,
            )
        self._children[session_id] = child
        return child

    @property
    def pending(self) -> list[ApprovalRequest | QuestionRequest]:
        """The open pending items of the paused batch, in call order, with those of the
        subagents its suspended calls wait on."""
        checkpoint = self.state.checkpoint
        if checkpoint is None or checkpoint.closed:
            return []
        items = [p.request for p in checkpoint.pending.values() if p.decision is None]
        for waiting in checkpoint.suspended.values():
            child = self._children.get(waiting.session_id)
            if child is not None:
                items += child.pending
        return items

    async def resolve(self, pending_id: str, approval: Approval | Answer) -> Resolution:
        """Answer a pending item: an `Approval` for an approval, an `Answer` for a question.
        Edited arguments that are invalid or that the rules deny are refused (the item stays
        open; the error names the rule); a denial closes the batch (its other items are
        skipped); answering twice is a no-op. When nothing is outstanding, `resume()` finishes
        the batch and continues the run. Items of a subagent the batch waits on are resolved
        here too."""
        checkpoint = self.state.checkpoint
        for waiting in checkpoint.suspended.values() if checkpoint else ():
            child = self._children.get(waiting.session_id)
            if child is not None and any(p.id == pending_id for p in child.pending):
                done = await child.resolve(pending_id, approval)
                return Resolution(done.status, len(self.pending), done.error)
        if self.journal is not None:
            return await self.journal.resolve(self, pending_id, approval)
        if checkpoint is None or pending_id not in checkpoint.pending:
            raise UnknownPending(f"no pending item {pending_id!r} in session {self.id}")
        item = checkpoint.pending[pending_id]
        asked = item.request.args if isinstance(item.request, ApprovalRequest) else {}
        ruled = rule(
            items_of(checkpoint),
            recorded(pending_id, applied(approval, asked), now_iso()),  # (edits: a merge patch)
            edits_of(item, self._gate),
        )
        for event in ruled if isinstance(ruled, list) else ():
            apply(self.state, event)  # (the checkpoint, a view of the state, reads them)
        error = ruled.message if isinstance(ruled, Refusal) and ruled.why != "decided" else None
        return Resolution(outcome(ruled), len(self.pending), error)

    def resume(self, *, approver: Approver | None = None) -> Run:
        """Continue a paused run once all its pending items are resolved."""
        if not (self.state.paused and self.state.batch is not None):
            raise SessionBusy(f"session {self.id} has no paused run to resume")
        return self.run(None, approver=approver)

    def cancel(self) -> None:
        """Cancel the running run (see `Run.cancel`). With none in progress, or one past its
        `done` (which is left to end), no run is stopped but what was queued for the next run
        is dropped, as `clear_queue()` drops it (a durable session logs it)."""
        run = self._run
        if run is not None and not run.past_done:
            run.cancel()
        else:  # (past its `done`, a run still holding its lease logs it; else once it let go)
            self._clear(None, through_run=False)


def items_of(checkpoint: Checkpoint) -> list[Item]:
    """The items of a paused batch as a decision finds them (`rulebook.rule`), in request order."""
    decided = checkpoint.decided
    return [
        Item(
            i,
            "question" if isinstance(p.request, QuestionRequest) else "approval",
            d.status if (d := decided.get(i)) is not None else "open",
        )
        for i, p in checkpoint.pending.items()
    ]


def edits_of(item: Pending, gate: Gate) -> Edits | None:
    """How an edit of an approval's arguments is vetted: in the scope it was asked in."""
    request = item.request
    if not isinstance(request, ApprovalRequest):
        return None
    return Edits(item.tool, gate, request.scope, request.call.name)


async def run(
    agent: Agent, input: str | UserMessage, *, approver: Approver | None = None, **session: Any
) -> RunResult[Any]:
    """Run `input` through `agent` in a new session and return how it ended."""
    return await Session(agent, **session).run(input, approver=approver).result()


def run_sync(
    agent: Agent, input: str | UserMessage, *, approver: Approver | None = None, **session: Any
) -> RunResult[Any]:
    """`run` for scripts without an event loop."""
    return asyncio.run(run(agent, input, approver=approver, **session))


async def collect(
    events: AsyncIterator[ev.Event], on_event: Callable[[ev.Event], Any] | None = None
) -> list[ev.Event]:
    """Every event of a stream, in order (calling `on_event` for each as it arrives)."""
    out = []
    async for event in events:
        if on_event is not None:
            on_event(event)
        out.append(event)
    return out
