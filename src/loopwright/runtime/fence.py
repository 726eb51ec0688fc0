"""A takeover fences the subagent sessions of the run it takes over.

A subagent's run writes its own session under a lease of its own, claimed inside its parent's
call. When the parent's run is taken over (its lease expired: its process died, or stalls), the
child's run belongs to the same dead or stalled process: the process taking the parent over
takes each such child over too (`LogJournal.recover`: its epoch moves on, so a stalled child
that goes on is refused its next write, as its parent is), before it decides what the dead
batch was waiting on. A child whose lease is still live makes the takeover wait (`SessionBusy`).
A child's run claims its session, then renews its parent's lease (`still_above`): a child
claimed after a takeover of its parent is refused, one claimed before is one the takeover finds.

A child so taken over that is paused on items (it died waiting on a human, or paused just
before its parent died — released paused, too: the call's newest child) holds its parent's
call: the dead parent run is logged paused as its live run would have paused, its call
suspended on the child's items (`suspension`), so that the decisions on them resume the
parent, whose call resumes the child (P4). Its run did not die waiting otherwise: the parent's
batch is recovered (the call's result says it may have run), the child's items are closed with
it, and the child's own unfinished batch is closed as a recovery closes one (`abandoned`): no
run goes on with that session, and its log gives each call it started a result (P3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .. import events as ev
from ..agent import Agent
from ..errors import UnknownSession
from ..gate.batch import Checkpoint, record
from ..gate.decide import INTERRUPTED, MAY_HAVE_RUN
from ..loop.session import Session
from ..state.replay import died_waiting
from ..state.session_state import OpenBatch
from ..store import StaleWriter
from ..store.log import Lease, SessionKey, SessionRecord, Store
from ..tools import Tool

Ending = Callable[[Session], list[ev.Event]]
"""What closes the batch of a dead run that no run goes on with (`abandoned`)."""


class Parent(Protocol):
    """A session's journal, as a takeover sees it (`LogJournal`)."""

    @property
    def log(self) -> Store: ...

    key: SessionKey
    tools: dict[str, Tool]
    snapshot_seq: int

    async def child(self, parent: Session, agent: Agent, session_id: str) -> Session: ...


class Above(Protocol):
    """The journal of a child's parent, as a child's claim sees it (`LogJournal`)."""

    lease: Lease | None

    def lose(self, why: StaleWriter) -> None: ...


async def still_above(log: Store, above: Above | None, ttl: float) -> None:
    """A child's run, its session just claimed, checks that its parent's run still holds its
    lease (a renewal, fenced): a takeover of the parent fences the children it finds, so a
    child claimed after it must not run (`StaleWriter`, and the parent's run loses its lease).
    Claimed before the renewal, the child is one the takeover finds."""
    if above is None or above.lease is None:
        return
    try:
        above.lease = await log.renew(above.lease, ttl=ttl)
    except StaleWriter as exc:
        above.lose(exc)
        raise


async def dead_ending(parent: Parent, session: Session) -> list[ev.Event] | None:
    """The pause that ends the run that died, if it was waiting on a human
    (`replay.died_waiting`) or its subagent calls are held by children paused on items
    (`suspension`, once they are fenced); else None (its batch is recovered)."""
    if session.state.batch is None:
        return None
    held = await fence_children(parent, session)
    stored = [s.event for s in await parent.log.read(parent.key, after=parent.snapshot_seq)]
    run = stored[max((n for n, e in enumerate(stored) if e.type == "session"), default=0) :]
    return died_waiting(session.state, run) or suspension(session.state.batch, run, held)


async def fence_children(parent: Parent, session: Session) -> list[ev.ToolSuspended]:
    """Take over the sessions of the subagent calls the dead run of `session` had started and
    not finished (their runs died with it), each recovered as a dead run (`recover`); the
    suspension of each such call whose child is paused on items now."""
    batch = session.state.batch
    suspended: list[ev.ToolSuspended] = []
    if batch is None:
        return suspended
    for call in batch.calls:
        tool = parent.tools.get(call.name)
        if tool is None or tool.subagent is None or call.id not in batch.started:
            continue
        if call.id in batch.results or call.id in batch.suspended:
            continue
        base, records = f"{parent.key.id}/{tool.subagent.name}/{call.id}", list[SessionRecord]()
        while True:  # (`subagents._new`: a call id used before gets `~2`, `~3`, …)
            name = base if not records else f"{base}~{len(records) + 1}"
            try:
                key = SessionKey(parent.key.tenant, tool.subagent.name, name)
                records.append(await parent.log.session(key))
            except UnknownSession:
                break
        for found in records:
            held = found.lease_owner is not None or found.status in ("running", "interrupted")
            if not held and (found is not records[-1] or found.status != "paused"):
                continue  # (the last is this call's: paused, it may hold the call)
            child = await parent.child(session, tool.subagent, found.key.id)
            await child.journal.recover(child, abandoned)  # type: ignore[union-attr]
            paused = child.state.checkpoint
            if paused is not None and paused.pending and (held or _waits(paused)):
                ids = list(paused.pending)
                suspended.append(
                    ev.ToolSuspended(
                        id=call.id, tool=call.name, session_id=found.key.id, pending_ids=ids
                    )
                )
    return suspended


def _waits(paused: Checkpoint) -> bool:
    """Whether a paused child waits on one of its items: one not closed (skipped) with the
    batch of an earlier call of the same id."""
    return any(
        (d := paused.decided.get(i)) is None or d.status != "skipped" for i in paused.pending
    )


def abandoned(child: Session) -> list[ev.Event]:
    """What ends the dead run of a child that holds nothing (it is not paused on items): the
    parent's call is recovered, so nothing runs that session again. Its unfinished batch is
    closed now as a recovery closes one, every call interrupted (one it started may have run:
    its result says so, P3); empty when the child is paused or has no batch open."""
    batch = child.state.batch
    if batch is None or child.state.checkpoint is not None:
        return []
    missing = [c for c in batch.calls if c.id not in batch.results]
    lost = [c.id for c in missing]
    events: list[ev.Event] = [
        ev.Session(session_id=child.id),
        ev.RunInterrupted(interrupted_calls=lost, rerun_calls=[], carry_over=None),
    ]
    for call in missing:
        events.append(ev.ToolInterrupted(id=call.id, tool=call.name))
        events += record(call, MAY_HAVE_RUN if call.id in batch.started else INTERRUPTED, "Error.")
    return events


def suspension(
    batch: OpenBatch, run: list[ev.Event], calls: list[ev.ToolSuspended]
) -> list[ev.Event] | None:
    """The pause the dead run's live approver would have logged, its subagent calls `calls`
    suspended: only when every call it started without a result is one of them, and it asked
    nothing of its own (else None: its batch is recovered)."""
    held = {c.id for c in calls}
    if (
        not calls
        or batch.asked
        or any(c not in batch.results and c not in held for c in batch.started)
    ):
        return None
    ending: list[ev.Event] = list(calls)
    steps = [e for e in run if isinstance(e, ev.StepStarted | ev.StepFinished)]
    if steps and isinstance(steps[-1], ev.StepStarted):
        replies = [e for e in run[run.index(steps[-1]) :] if isinstance(e, ev.MessageCompleted)]
        usage = replies[-1].message.usage if replies else None
        ending.append(ev.StepFinished(step=steps[-1].step, usage=usage))
    ids = [i for c in calls for i in c.pending_ids]
    text = f"Paused: waiting for {', '.join(c.tool for c in calls)}."
    return [*ending, ev.LoopPaused(pending_ids=ids), ev.Done(text=text, stop_reason="paused")]
