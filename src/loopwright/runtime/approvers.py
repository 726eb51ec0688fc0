"""The live approvers of runs the runtime drives; both answer with the decision the log records.

- `held`: for a client that holds its stream. It waits for the item's decision, made anywhere
  (`Decisions.wait_decided`), while at least one follower follows the session; with none left
  (or none to begin with) it defers, and the run pauses durably as it always did.
- `authoritative`: wraps a caller's approver (a terminal prompt, an in-process callback). The
  prompt races a decision made elsewhere: an answer given here is recorded first (an edit vetted
  as `resolve` vets it), and whichever decision the log holds first is the one the run acts on; a
  prompt overtaken by a decision made elsewhere is cancelled. `racing` makes one for each run
  of a session opened in a log (`LogJournal.live`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..agent import Agent
from ..approvals import DEFER, Answer, Approval, Approver, ApproverResult, Request, copied
from ..store import PendingRecord
from ..store.log import Decisions, SessionKey, Store
from .decisions import answer_of, owner_of, record
from .journal import LiveApprover, LogJournal
from .live import Live, LiveRun


def held(registry: Live, log: Decisions, key: SessionKey) -> Approver:
    """The approver of a run of the top-level session `key` (and of its subagents' runs)."""

    async def approve(request: Request) -> ApproverResult:
        live = registry.get(key)
        if registry.followers(key) == 0:
            return _defer(live)
        decided = asyncio.ensure_future(log.wait_decided(key.tenant, request.id))
        if live is not None:
            live.waiting.add(request.id)
            registry.lifecycle.status(key, "waiting")
        try:
            await asyncio.wait((decided, registry.gone(key)), return_when=asyncio.FIRST_COMPLETED)
            item = decided.result() if decided.done() else None
        finally:
            if live is not None:
                live.waiting.discard(request.id)
            await _cancel(decided)
        if item is None:
            return _defer(live)  # nobody follows any more: the item stays open, the run pauses
        if live is not None and not live.waiting:
            registry.lifecycle.status(key, "running")
        return await _acted_on(live, item)

    # (it answers from the log: a question the log holds no item for is declined, `mcp.elicit`)
    approve.from_log = True  # type: ignore[attr-defined]
    return approve


def _defer(live: LiveRun | None) -> ApproverResult:
    """The run pauses durably on the item (`LiveRun.deferred` says so while it ends)."""
    if live is not None:
        live.deferred = True
    return DEFER


def racing(registry: Live | None) -> LiveApprover:
    """What makes the approvers of a journal's runs (`LogJournal.live_approver`): each is
    `authoritative` over the journal's log, with the live runs of `registry` (a runtime's; None:
    a session opened in a log on its own, `open_session`)."""

    def live(approver: Approver, journal: LogJournal) -> Approver:
        return authoritative(approver, journal.log, journal.agents, registry, journal.key)

    return live


def authoritative(
    approver: Approver,
    log: Store,
    agents: Mapping[str, Agent],
    registry: Live | None,
    key: SessionKey,
) -> Approver:
    """`approver`, answering with the decision the log records first (see the module); the run
    asking it is looked up in `registry`, when given, to act on a decision once it is shown."""

    async def approve(request: Request) -> ApproverResult:
        asking = asyncio.ensure_future(_ask(approver, request))
        elsewhere = asyncio.ensure_future(log.wait_decided(key.tenant, request.id))
        live = registry.get(key) if registry is not None else None
        try:
            await asyncio.wait((asking, elsewhere), return_when=asyncio.FIRST_COMPLETED)
            if elsewhere.done():
                return await _acted_on(live, elsewhere.result())
            answer = asking.result()
        finally:
            await _cancel(asking)  # a prompt overtaken is closed before the run goes on
            await _cancel(elsewhere)
        if not isinstance(answer, Approval | Answer):
            return DEFER
        owner = await owner_of(log, agents, key.tenant, request.id)
        outcome = await record(log, owner, answer)
        if outcome.status == "invalid":  # an edit the run refuses too: it asks again, saying why
            if not isinstance(answer, Approval) or answer.args is None:
                return DEFER
            # as a plain `Approval`: only the log's own answers (`answer_of`) pass as vetted
            return Approval(
                approved=answer.approved, args=answer.args, reason=answer.reason, by=answer.by
            )
        return await _acted_on(live, outcome.item)

    approve.authoritative = True  # type: ignore[attr-defined]
    approve.from_log = True  # type: ignore[attr-defined]
    # the person it wraps (a terminal prompt): a question no item of the log stands for (an MCP
    # server's elicitation, `mcp.elicit`) is put to them directly
    approve.person = approver  # type: ignore[attr-defined]
    return approve


async def _acted_on(live: LiveRun | None, item: PendingRecord) -> ApproverResult:
    """The recorded decision as the run takes it, once its stream has shown the record."""
    if live is not None:
        await live.journal.catch_up()
    answer = answer_of(item)
    return DEFER if answer is None else answer


async def _ask(approver: Approver, request: Request) -> ApproverResult:
    reply = approver(request)
    if inspect.isawaitable(reply):
        reply = await reply
    if isinstance(reply, Approval) and reply.args is not None:  # an edit, as it arrived
        reply = replace(reply, args=copied(reply.args))
    return reply


async def _cancel(task: asyncio.Future[Any]) -> None:
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
