"""Durable sessions: the journal that writes a run to the store as it goes, and the Python API
to open sessions, list and resolve pending items from any process, and export logs.

What is committed when (SPEC §7): token deltas never one by one; every other event is committed,
grouped so that a commit happens at each point that matters — the input before the first step,
each complete reply, each approval request before anyone is asked, each tool call's intent before
it runs and its result right after, and the end of the run. A reply still streaming is committed
as `message:partial` every `partial_every` seconds, so a crash leaves carry-over.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO

from .. import events as ev
from ..agent import Agent
from ..approvals import Answer, Approval
from ..decide import Resolution, vet_edit
from ..errors import ConfigError, UnknownSession
from ..messages import History
from ..session import Session
from ..wire import messages_to_json, to_dict
from . import Claim, PendingRecord, SessionStatus, StaleWriter, Store, StoredEvent, StoreError
from .rebuild import rebuild
from .sqlite import process_identity

OWNER = process_identity(os.getpid())
"""This process, as the holder of a claim (`host:boot:pid:start`)."""

NOT_STORED = frozenset({"text:delta", "thinking:delta", "tool:delta"})
COMMIT_AT = frozenset(
    {
        "input:received",
        "steering:injected",
        "message:completed",
        "pending:requested",
        "tool:started",
        "tool:result",
        "tool:late_result",
        "run:interrupted",
        "compaction:finished",
        "done",  # with the terminal event just before it: nothing runs between the two
    }
)
CRASH_ENV = "LOOPWRIGHT_CRASH_AFTER"
"""Tests only: `type[#n][,…]` kills the process right after the n-th commit holding that type."""


class DurableJournal:
    """A `Journal` that writes one session's runs to a `Store`."""

    def __init__(self, store: Store, agent: Agent, *, partial_every: float = 0.5) -> None:
        self.store = store
        self.agent = agent
        self.partial_every = partial_every
        self.claim: Claim | None = None
        self.loaded_seq = 0
        self.buffer: list[ev.Event] = []
        self.partial: list[str] = []
        self.last_commit = 0.0
        self.crash = _crash_points(os.environ.get(CRASH_ENV, ""))

    async def begin(self, session: Session, input: str | None) -> None:
        self.partial.clear()  # a reply cut off in the last run is not this run's
        claim, died = self.store.claim(session.id, session.tenant, self.agent.name, _owner())
        self.claim = claim
        record = self.store.session(session.id, session.tenant)
        if died or record.last_seq != self.loaded_seq:
            checkpoint_before = session.history.checkpoint is not None
            _refill(session.history, self.load(session, died=died))
            if died:
                for item in self.store.pending(session.tenant, session_id=session.id):
                    self.store.decide(item.id, session.tenant, status="skipped", by="recovery")
            if input is None and checkpoint_before and session.history.checkpoint is None:
                self.store.release(claim, "idle")
                self.claim = None
                raise StaleWriter(f"session {session.id}: the paused run was finished elsewhere")

    def load(self, session: Session, *, died: bool = False) -> History:
        stored = self.store.load(session.id, session.tenant)
        self.loaded_seq = stored[-1].seq if stored else 0
        decisions = {
            p.id: p for p in self.store.pending(session.tenant, session_id=session.id, status=None)
        }
        tools = {t.name: t for t in self.agent.tools}
        return rebuild(stored, tools, decisions, died=died)

    async def append(self, session_id: str, event: ev.Event) -> int | None:
        kind = event.type
        if kind in NOT_STORED:
            if kind == "text:delta":
                self.partial.append(event.delta)  # type: ignore[union-attr]
                if time.monotonic() - self.last_commit >= self.partial_every:
                    self.commit([*self.buffer, ev.MessagePartial(text="".join(self.partial))])
            return None
        if kind == "message:completed":
            self.partial.clear()
        self.buffer.append(event)
        seq = self.position
        if kind in COMMIT_AT:
            self.commit(self.buffer)
        return seq

    def record(self, event: ev.Event) -> None:
        if self.claim is not None:
            self.buffer.append(event)
            self.commit(self.buffer)

    @property
    def position(self) -> int:
        """The sequence number of the last event appended (committed, or buffered to be)."""
        return self.loaded_seq + len(self.buffer)

    def committed(self, seq: int) -> bool:
        """Whether the event with this sequence number is in the log (and all before it)."""
        return self.loaded_seq >= seq

    def commit(self, events: Sequence[ev.Event]) -> None:
        assert self.claim is not None
        self.loaded_seq = self.store.append(self.claim, events)
        self.buffer = []
        self.last_commit = time.monotonic()
        if self.crash:
            _maybe_crash(self.crash, events)

    async def end(self, session: Session, stop_reason: ev.RunStopReason | None) -> None:
        """Commit what is left and release the claim; after a failure (a full or locked
        database) the original error stands and the session is left `interrupted`."""
        claim = self.claim
        if claim is None:
            return
        status: SessionStatus = "paused" if stop_reason == "paused" else "idle"
        try:
            if self.buffer:
                self.commit(self.buffer)
        except StoreError:
            status = "interrupted"
        finally:
            self.claim, self.buffer = None, []
        if stop_reason is None:
            status = "interrupted"  # the run stopped without its `done` (an exception)
        with contextlib.suppress(StoreError):
            self.store.release(claim, status)

    async def resolve(
        self, session: Session, pending_id: str, decision: Approval | Answer
    ) -> Resolution:
        return await resolve(self.store, self.agent, pending_id, decision, tenant=session.tenant)

    async def child(self, parent: Session, agent: Agent, session_id: str) -> Session:
        return await open_session(
            agent, self.store, session_id, tenant=parent.tenant, environment=parent.environment
        )


async def open_session(
    agent: Agent,
    store: Store,
    session_id: str | None = None,
    *,
    tenant: str = "default",
    environment: str | None = None,
) -> Session:
    """A session backed by the store: its history is rebuilt from the log (nothing when new)."""
    journal = DurableJournal(store, agent)
    session = Session(
        agent, session_id=session_id, tenant=tenant, environment=environment, journal=journal
    )
    try:
        record = store.session(session.id, tenant)
    except UnknownSession:
        return session
    _refill(session.history, journal.load(session, died=record.status == "interrupted"))
    for mode, text in session.history.queued:  # sent, logged, not delivered yet
        (session.steer if mode == "steer" else session.follow_up)(text)
    checkpoint = session.history.checkpoint
    for waiting in checkpoint.suspended.values() if checkpoint else ():
        if waiting.tool.subagent is not None:  # so that its items are this session's too
            await session.child(waiting.tool.subagent, waiting.session_id)
    return session


async def resolve(
    store: Store,
    agent: Agent,
    pending_id: str,
    decision: Approval | Answer,
    *,
    tenant: str = "default",
) -> Resolution:
    """Record a human's answer to a pending item, from any process: an `Approval` for an
    approval, an `Answer` for a question.

    Edited arguments are validated against the tool, then put through the agent's rules in the
    item's scope: an invalid edit, or one the rules deny, is refused (the item stays open and
    the error names the rule); otherwise the human's approval stands. A denial closes the batch (the open items of subagents its calls wait on
    are skipped with it). A second answer, or one after the batch closed, changes nothing and
    says so. `outstanding` counts what is still open under the top-level session. A foreign
    tenant's id is unknown (`UnknownPending`).
    """
    item = store.pending_item(pending_id, tenant)
    root = _chain(store, item.session_id, tenant)[-1]

    def still_open() -> int:
        return len(open_under(store, root, tenant))

    if (item.kind == "question") != isinstance(decision, Answer):
        kind = "a question: answer it" if item.kind == "question" else "an approval"
        return Resolution("invalid", still_open(), f"{pending_id} is {kind}")
    if isinstance(decision, Answer):
        changed, _ = store.decide(
            pending_id, tenant, status="answered", by=decision.by, answer=decision.text
        )
        return Resolution("resolved" if changed else "already_resolved", still_open())
    tool = agent.find_tool(item.tool)
    if decision.approved and decision.args is not None and tool is not None:
        try:
            vet_edit(tool, agent.gate(), _scope_of(store, item), decision.args)
        except ValueError as exc:
            return Resolution("invalid", still_open(), str(exc))
    changed, _ = store.decide(
        pending_id,
        tenant,
        status="approved" if decision.approved else "denied",
        by=decision.by,
        edited_args=decision.args,
        note=decision.reason,
    )
    if changed and not decision.approved:  # the batch is closed: so are its subagents' items
        for nested in open_under(store, item.session_id, tenant):
            if nested.session_id != item.session_id:
                store.decide(nested.id, tenant, status="skipped", by=decision.by)
    return Resolution("resolved" if changed else "already_resolved", still_open())


def _scope_of(store: Store, item: PendingRecord) -> ev.Scope:
    """The scope the item's call was decided in, as its `approval:pending` announced it."""
    for stored in store.load(item.session_id, item.tenant, after=item.batch_seq):
        if isinstance(stored.event, ev.ApprovalPending) and stored.event.id == item.id:
            return stored.event.scope
    raise ConfigError(f"pending item {item.id}: its announcement is not in the log")


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a pending item belongs to: the agent whose call waits (a subagent for an item raised
    inside a subagent's run), and the top-level session whose run resumes once it is resolved."""

    item: PendingRecord
    agent: Agent
    root_agent: Agent
    root_session_id: str


def owner_of(
    store: Store, agents: Mapping[str, Agent], pending_id: str, *, tenant: str = "default"
) -> Owner:
    """Find a pending item of `tenant` and the agents it belongs to. A subagent's session id is
    `<parent session>/<child>/<call id>`: the chain is walked up to the top-level session, whose
    agent must be in `agents`, and down again through the subagent tools. `UnknownPending` for
    an unknown or foreign id; `ConfigError` when the agents no longer match the log."""
    item = store.pending_item(pending_id, tenant)
    chain = _chain(store, item.session_id, tenant)
    root_id = chain[-1]
    root_name = store.session(root_id, tenant).agent
    root = agents.get(root_name)
    if root is None:
        raise ConfigError(f"session {root_id} belongs to agent {root_name!r}, which is not loaded")
    agent = root
    for session_id in reversed(chain[:-1]):
        name = session_id.rsplit("/", 2)[1]
        found = agent.find_tool(name)
        if found is None or found.subagent is None:
            raise ConfigError(
                f"agent {agent.name!r} has no subagent {name!r} (session {session_id})"
            )
        agent = found.subagent
    return Owner(item, agent, root, root_id)


def _chain(store: Store, session_id: str, tenant: str) -> list[str]:
    """A session and its parents, up to the top-level session (subagent ids nest)."""
    chain = [session_id]
    while chain[-1].count("/") >= 2:
        parent = chain[-1].rsplit("/", 2)[0]
        try:
            store.session(parent, tenant)
        except UnknownSession:
            break
        chain.append(parent)
    return chain


def owner_session(store: Store, session_id: str, tenant: str = "default") -> str:
    """The top-level session a (subagent's) session belongs to."""
    return _chain(store, session_id, tenant)[-1]


def open_under(store: Store, session_id: str, tenant: str) -> list[PendingRecord]:
    """The open items of a top-level session and of the subagent sessions under it."""
    return [
        p
        for p in store.pending(tenant)
        if p.session_id == session_id or p.session_id.startswith(session_id + "/")
    ]


def export_jsonl(store: Store, session_id: str, out: IO[str], *, tenant: str = "default") -> int:
    """Write a session's log as JSON lines `{"seq", "at", "event"}`; returns the line count."""
    stored = store.load(session_id, tenant)
    for item in stored:
        line = {"seq": item.seq, "at": item.at, "event": to_dict(item.event)}
        out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    return len(stored)


def read_jsonl(lines: Iterator[str] | IO[str]) -> list[StoredEvent]:
    """Parse an export back into stored events (the inverse of `export_jsonl`)."""
    from ..wire import loads

    out = []
    for line in lines:
        if line.strip():
            data = json.loads(line)
            out.append(StoredEvent(data["seq"], loads(data["event"]), data["at"]))
    return out


def export_traces(
    store: Store, agent: Agent, session_id: str, directory: str | Path, *, tenant: str = "default"
) -> list[Path]:
    """One file per model context: the messages the model saw, as a JSON array. Each compaction
    starts a new context (and a new file) with the compacted view."""
    stored = store.load(session_id, tenant)
    tools = {t.name: t for t in agent.tools}
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    cuts = [i for i, item in enumerate(stored) if item.event.type == "compaction:finished"]
    paths = []
    for number, end in enumerate([*cuts, len(stored)], start=1):
        history = rebuild(stored[:end], tools, {}, died=False)
        path = target / f"{session_id}.context-{number}.json"
        path.write_text(messages_to_json(history.messages))
        paths.append(path)
    return paths


def _refill(history: History, fresh: History) -> None:
    """Replace a history's contents in place (the running loop holds the object)."""
    for f in fields(History):
        setattr(history, f.name, getattr(fresh, f.name))


def _owner() -> str:
    return OWNER


def _crash_points(spec: str) -> dict[str, int]:
    points = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, count = part.partition("#")
        points[kind] = int(count or 1)
    return points


def _maybe_crash(points: dict[str, int], events: Sequence[ev.Event]) -> None:
    for event in events:
        if event.type in points:
            points[event.type] -= 1
            if points[event.type] == 0:
                os._exit(86)
