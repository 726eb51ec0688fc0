"""Decisions on pending items, as the event log records them: whose item it is, whether a
decision may be recorded (an edit is vetted first), and how a recorded decision reads back.

Every door records the decider it authenticated (a bearer token's name, an approval link, the
terminal's user: `by`), never a name the caller gives; a caller's name is kept beside it, as a
labelled note (`noted`), for what it is worth.

The log is the one authority (`EventLog.decide`: single-use, the first decision wins); this
module is what every door — a route, a command, a live approver — goes through to reach it. A
subagent's item belongs to a session whose parent chain (recorded by the log) leads up to the
top-level session: that session's run is the one that resumes once nothing under it is open.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .. import events as ev
from ..agent import Agent
from ..approvals import Answer, Approval, Logged
from ..errors import ConfigError
from ..gate import rulebook
from ..gate.batch import Checkpoint
from ..gate.rulebook import Edits, Item
from ..store import PendingRecord
from ..store.log import EventLog, ReadModels, SessionKey, Store, Verdict
from ..toolsets import Toolsets
from .commits import crash_after

Decided = Approval | Answer


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a pending item belongs to: the agent whose call waits (a subagent for an item raised
    in a subagent's run), and the top-level session whose run resumes once it is decided."""

    item: PendingRecord
    key: SessionKey
    """The item's own session."""
    agent: Agent
    root: SessionKey
    root_agent: Agent


def key_of(item: PendingRecord) -> SessionKey:
    return SessionKey(item.tenant, item.agent, item.session_id)


async def chain(log: ReadModels, key: SessionKey) -> list[SessionKey]:
    """A session and its parents, up to the top-level session."""
    keys = [key]
    record = await log.session(key)
    while record.parent is not None:
        keys.append(record.parent)
        record = await log.session(record.parent)
    return keys


async def owner_of(
    log: ReadModels, agents: Mapping[str, Agent], tenant: str, pending_id: str
) -> Owner:
    """Find a pending item of `tenant` and the agents it belongs to: the chain of sessions is
    walked up to the top-level one, whose agent must be in `agents`, and down again through the
    subagent tools. `UnknownPending` for an unknown or foreign id; `ConfigError` when the agents
    no longer match the log."""
    item = await log.pending_item(tenant, pending_id)
    keys = await chain(log, key_of(item))
    root = keys[-1]
    root_agent = agents.get(root.agent)
    if root_agent is None:
        raise ConfigError(f"session {root.id} belongs to agent {root.agent!r}, which is not loaded")
    return Owner(item, keys[0], descend(root_agent, keys), root, root_agent)


def descend(root_agent: Agent, keys: list[SessionKey]) -> Agent:
    """The agent of `keys[0]`, found from the top-level agent through its subagent tools."""
    agent = root_agent
    for key in reversed(keys[:-1]):
        found = agent.find_tool(key.agent)
        if found is None or found.subagent is None:
            raise ConfigError(f"agent {agent.name!r} has no subagent {key.agent!r} ({key.id})")
        agent = found.subagent
    return agent


async def refusal(
    log: EventLog, owner: Owner, decided: Decided, toolsets: Toolsets | None = None
) -> rulebook.Refusal | None:
    """Why `decided` may not be recorded on the owner's item as this door found it, or None
    (`rulebook.refusal`: already decided, the wrong kind of answer, or edited arguments that
    fail the tool's schema or that the rules deny, in the scope the item was asked in). An edit
    is vetted with the agent's tools as listed now: its live toolsets entered through
    `toolsets` (None: a run that asks has them entered)."""
    item = owner.item
    recording, edits = rulebook.recorded(item.id, decided, ""), None
    edited = recording.status == "approved" and recording.args is not None
    if item.status == "open" and item.kind == "approval" and edited:
        await owner.agent.refresh_tools(toolsets)
        tool = owner.agent.find_tool(item.tool)
        scope = await scope_of(log, owner) if tool is not None else None
        edits = Edits(tool, owner.agent.gate(), scope, item.tool)
    return rulebook.refusal(Item(item.id, item.kind, item.status), recording, edits)


async def scope_of(log: EventLog, owner: Owner) -> ev.Scope:
    """The scope the item's call was decided in, as its `approval:pending` announced it."""
    item = owner.item
    for stored in await log.read(owner.key, after=max(0, item.batch_seq - 1)):
        if isinstance(stored.event, ev.ApprovalPending) and stored.event.id == item.id:
            return stored.event.scope
    raise ConfigError(f"pending item {item.id}: its announcement is not in the log")


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording a decision did, and the item as it now stands (with the decision that
    won, when another one was first)."""

    status: Literal["resolved", "already_resolved", "invalid"]
    item: PendingRecord
    error: str | None = None
    """Why the decision was refused (`invalid`): the message names the rule."""


async def record(
    log: Store,
    owner: Owner,
    decided: Decided,
    toolsets: Toolsets | None = None,
    claimed: str | None = None,
) -> Recorded:
    """Record a decision on the owner's item, unless it is refused or another one came first
    (`refusal`, with `toolsets`); `claimed`, a name the caller gave, goes in its note
    (`noted`). A denial closes the item's batch (the log skips its other items) and the items
    of the subagent sessions its calls wait on."""
    item = owner.item
    decided = rulebook.applied(decided, item.args)  # (an edit is a merge patch: `edits`)
    refused = await refusal(log, owner, decided, toolsets)
    if refused is not None:
        error = None if refused.why == "decided" else refused.message
        return Recorded(rulebook.outcome(refused), item, error)
    done = await log.decide(item.tenant, item.id, decision_of(decided, claimed))
    if not done.changed:
        return Recorded("already_resolved", done.item)
    crash_after("pending:decided")  # (tests: a crash between a decision and its resumption)
    by = rulebook.closes_under(item.id, done.item.status)
    if by is not None:
        for nested in await open_under(log, owner.key):
            if key_of(nested) != owner.key:
                await log.decide(item.tenant, nested.id, Verdict("skipped", by=by))
    return Recorded("resolved", done.item)


def decision_of(decided: Decided, claimed: str | None = None) -> Verdict:
    """A human's answer as the log records it (`claimed`: see `noted`)."""
    if isinstance(decided, Answer):
        note = noted(None, decided.by, claimed)
        return Verdict("answered", by=decided.by, answer=decided.text, note=note)
    status: Literal["approved", "denied"] = "approved" if decided.approved else "denied"
    note = noted(decided.reason, decided.by, claimed)
    return Verdict(status, by=decided.by, edited_args=decided.args, note=note)


CLAIMED = "name given by the caller, not verified: "
"""The label of a caller's own name in a decision's note."""


def noted(reason: str | None, by: str, claimed: str | None) -> str | None:
    """A decision's note: its reason, then the name the caller gave (`claimed`), labelled as
    such, unless it is the decider's own (`by`, the door's authenticated principal)."""
    claimed = claimed.strip() if claimed else None
    if not claimed or claimed == by:
        return reason
    label = f"({CLAIMED}{claimed})"
    return f"{reason} {label}" if reason else label


def terminal_user() -> str:
    """Who decides at this process's terminal (the command line, an editor's ACP agent): the
    operating system's user, as decisions record it."""
    try:
        return getpass.getuser()
    except Exception:  # (no user name in the environment nor the password database)
        return "unknown-user"


def answer_of(item: PendingRecord) -> Decided | None:
    """What a recorded decision means to the run waiting on it (None: still open). An item
    skipped (a sibling's denial closed its batch) reads as a denial; a skipped question has
    no answer."""
    by = item.decided_by or "unknown"
    match item.status:
        case "approved":
            return Logged(approved=True, args=item.edited_args, reason=item.note, by=by)
        case "denied":
            return Approval(approved=False, reason=item.note, by=by)
        case "answered":
            return Answer(text=item.answer or "", by=by)
        case "skipped" if item.kind == "approval":
            return Approval(approved=False, reason=f"skipped ({by})", by=by)
        case _:
            return None


async def open_under(log: ReadModels, root: SessionKey) -> list[PendingRecord]:
    """The open items of a session and of the subagent sessions under it, in request order."""
    out: list[PendingRecord] = []
    under: dict[SessionKey, bool] = {}
    cursor: str | None = None
    while True:
        page = await log.pending(root.tenant, status="open", cursor=cursor)
        for item in page.items:
            key = key_of(item)
            if key == root:
                out.append(item)
            elif item.session_id.startswith(root.id + "/"):  # a subagent's id nests its parent's
                if key not in under:
                    under[key] = root in await chain(log, key)
                if under[key]:
                    out.append(item)
        cursor = page.cursor
        if cursor is None:
            return out


async def skip_unreachable(
    log: Store,
    key: SessionKey,
    checkpoint: Checkpoint | None,
    keys: list[SessionKey] | None,
    by: str,
    why: str,
) -> None:
    """Skip the open items that no resumption of the session `key` can reach: those neither in
    its paused batch (`checkpoint`) nor under a subagent session the batch waits on. Items are
    looked for in the sessions `keys`, or (None) in every session under `key`."""
    ids, nested = set[str](), list[str]()
    if checkpoint is not None and not checkpoint.closed:
        ids = {i for i, p in checkpoint.pending.items() if p.decision is None}
        nested = [  # (a call suspended on its own question waits on an item in `ids`)
            s.session_id for s in checkpoint.suspended.values() if s.session_id != key.id
        ]
    if keys is None:
        items = await open_under(log, key)
    else:
        items = [p for k in keys for p in await _open_in(log, k)]
    for item in items:
        if item.id in ids or any(
            item.session_id == s or item.session_id.startswith(s + "/") for s in nested
        ):
            continue
        await log.decide(key.tenant, item.id, Verdict("skipped", by=by, note=why))


async def _open_in(log: ReadModels, key: SessionKey) -> list[PendingRecord]:
    return list((await log.pending(key.tenant, session=key, status="open", limit=1000)).items)
