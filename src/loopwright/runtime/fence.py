"""A takeover fences the subagent sessions of the run it takes over.

A subagent's run writes its own session under a lease of its own, claimed inside its parent's
call. When the parent's run is taken over (its lease expired: its process died, or stalls), the
child's run belongs to the same dead or stalled process: the process taking the parent over
takes each such child over too (`LogJournal.recover`: its epoch moves on, so a stalled child
that goes on is refused its next write, as its parent is), before it decides what the dead
batch was waiting on. A child whose lease is still live makes the takeover wait (`SessionBusy`).

A child so taken over that is paused on items (it died waiting on a human, or paused just
before its parent died) holds its parent's call: the dead parent run is logged paused as its
live run would have paused, its call suspended on the child's items (`suspended`), so that the
decisions on them resume the parent, whose call resumes the child (P4). Its run did not die
waiting otherwise: the parent's batch is recovered, and the child's items closed with it.
"""

from __future__ import annotations

from typing import Protocol

from .. import events as ev
from ..agent import Agent
from ..errors import UnknownSession
from ..replay import OpenBatch
from ..session import Session
from ..store.log import SessionKey, Store
from ..tools import Tool


class Parent(Protocol):
    """A session's journal, as a takeover sees it (`LogJournal`)."""

    @property
    def log(self) -> Store: ...

    key: SessionKey
    tools: dict[str, Tool]

    async def child(self, parent: Session, agent: Agent, session_id: str) -> Session: ...


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
        base, n = f"{parent.key.id}/{tool.subagent.name}/{call.id}", 1
        while True:  # (`subagents._new`: a call id used before gets `~2`, `~3`, …)
            name = base if n == 1 else f"{base}~{n}"
            try:
                record = await parent.log.session(
                    SessionKey(parent.key.tenant, tool.subagent.name, name)
                )
            except UnknownSession:
                break
            if record.lease_owner is not None or record.status in ("running", "interrupted"):
                child = await parent.child(session, tool.subagent, name)
                await child.journal.recover(child)  # type: ignore[union-attr]
                paused = child.history.checkpoint
                if paused is not None and paused.pending:
                    ids = list(paused.pending)
                    suspended.append(
                        ev.ToolSuspended(
                            id=call.id, tool=call.name, session_id=name, pending_ids=ids
                        )
                    )
            n += 1
    return suspended


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
