"""The runtime service: what every door (HTTP, CLI, editor, notifications) does to sessions, once.

Sessions are named by (tenant, agent, id). `send` starts a run, `resolve` records a decision on a
pending item and resumes the run it belongs to when nothing under that run is left open — once,
here, for every door. A run of this process is driven by a task the runtime owns; `events`
follows a session live across pauses. Another process with its own runtime on the same log is a
peer: a run there holds the session's lease, decisions made there wake runs waiting here (and the
reverse), a paused run is resumed by whichever process records the last decision, and a cancel,
steer or follow-up sent here reaches a run there through the log (`controls`).

    runtime = Runtime({"support": agent}, await open_log())
    run = await runtime.send("acme", "support", "order-1001", "where is my parcel?", hold=True)
    async for seq, event in run.stream(): ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from .. import events as ev
from ..agent import Agent
from ..approvals import Answer, Approval, Approver
from ..errors import ConfigError, SessionBusy
from ..loop.observers import Observer
from ..loop.session import Run, Session
from ..messages import UserMessage
from ..model_settings import ModelSettings
from ..store import PendingRecord, StaleWriter
from ..store.log import SessionKey, Store
from ..telemetry import observers as default_observers
from .approvers import held, racing
from .controls import cancel_elsewhere, log_for_next_run, log_queued, queue_elsewhere
from .decisions import open_under, owner_of, record
from .ending import decided, went_on
from .journal import LogJournal, Settings, session_in_log
from .live import Live, LiveRun
from .reading import Reading

logger = logging.getLogger("loopwright.runtime")

CONTROL_WAIT = 10.0
"""Seconds a cancel, steer or follow-up for a run in another process waits for that run."""
KEPT_SESSIONS = 256
"""Sessions kept in memory after their runs end here (the next message need not reread them)."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """What `resolve` did.

    - `waiting`: recorded; items under the same run are still open (`outstanding`), or none
      are but the caller asked not to resume (`resume=False`).
    - `resumed`: recorded, and the run goes on: `run` is its live run in this process, or None
      when it goes on in another process (one that was live there, or that resumed it first).
    - `already_resolved`: another decision came first; `item` holds it (and who made it).
      `run`: the run resumed here because that decision was never acted on (its resumer died).
    - `invalid`: refused (an edit the schema or the rules reject, or the wrong kind of answer);
      `error` names the rule; the item stays open.
    """

    status: Literal["waiting", "resumed", "already_resolved", "invalid"]
    item: PendingRecord
    """The item as it now stands."""
    root: SessionKey
    """The top-level session the item belongs to (the one that resumes)."""
    outstanding: list[PendingRecord]
    run: LiveRun | None = None
    error: str | None = None
    before: int = 0
    """The top-level session's last seq before the decision (`went_on` follows it from there)."""


class Runtime(Reading):
    """Sessions of `agents` kept in `log`, driven in this process (see the module)."""

    def __init__(
        self,
        agents: Mapping[str, Agent],
        log: Store,
        *,
        owner: str | None = None,
        ttl: float = 30.0,
        environment: str | None = None,
        partial_every: float = 0.5,
        snapshot_every: int = 200,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        observers: Sequence[Observer] | None = None,
    ) -> None:
        """`observers` see every event of its sessions' runs (None: the process's default as
        the runtime is made, `telemetry.observers()`). The live toolsets its runs enter are its
        own (`settings.toolsets`), exited as it closes."""
        self.agents = agents
        self.log = log
        self.live = Live(log)
        options: dict[str, Any] = {
            "ttl": ttl,
            "partial_every": partial_every,
            "snapshot_every": snapshot_every,
        }
        if owner is not None:
            options["owner"] = owner
        if sleep is not None:
            options["sleep"] = sleep
        observed = default_observers() if observers is None else tuple(observers)
        self.settings = Settings(environment=environment, observers=observed, **options)
        self._idle: OrderedDict[SessionKey, Session] = OrderedDict()
        """Sessions whose runs ended here, most recently used last."""
        self._closing = False

    def agent(self, name: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            raise ConfigError(f"unknown agent {name!r}")
        return agent

    async def open(self, key: SessionKey) -> Session:
        """The session as its log leaves it (a new one when the key is unused); its runs'
        approvers race the log, with this runtime's live runs (`approvers.racing`)."""
        return await session_in_log(
            self.log, self.agent(key.agent), key, self.settings, live_approver=racing(self.live)
        )

    async def _session(self, key: SessionKey, *, kept: bool) -> Session:
        """The session for a new run: with `kept`, the one a run of this process left, while
        the log holds nothing it has not seen (one small read); else opened from the log. (A
        resumption always reads the log: decisions on its subagents' items are in theirs.)"""
        session = self._idle.pop(key, None)
        if session is not None and kept:
            assert isinstance(session.journal, LogJournal)
            seen = session.journal.loaded_seq
            if seen >= 0 and (await self.log.session(key)).last_seq == seen:
                return session
        return await self.open(key)

    def _keep(self, live: LiveRun) -> None:
        if live.done is not None and live.failure is None:
            self._idle[live.key] = live.session
            self._idle.move_to_end(live.key)
            while len(self._idle) > KEPT_SESSIONS:
                self.live.lifecycle.disposed(self._idle.popitem(last=False)[0], "evicted")

    # ---- runs ----------------------------------------------------------------------------------

    async def send(
        self,
        tenant: str,
        agent: str,
        session_id: str | None,
        text: str | UserMessage,
        *,
        approver: Approver | None = None,
        hold: bool = False,
        settings: ModelSettings | None = None,
    ) -> LiveRun:
        """Start a run of `text` (a `UserMessage` for one with attachments; a new session when
        `session_id` is None), with the run's own model `settings` laid over the agent's;
        returns once its input is in the log. `approver` answers asks live (raced against
        decisions made elsewhere); without one, asks wait for a decision while someone follows
        the session (`hold` counts the caller from the start: iterate `run.stream()`, or
        `run.detach()`) and pause durably otherwise. `SessionBusy` while a run holds the
        session, or while it is paused on open items."""
        key = SessionKey(tenant, agent, session_id or secrets.token_hex(16))

        def begin(session: Session, asker: Approver) -> Run:
            return session.run(text, approver=asker, settings=settings)

        try:
            return await self._start(key, begin, approver, hold, True)
        except SessionBusy:  # paused: a decided batch goes on first (`ending`), then the text
            run = await self.act_on(key, approver, False)
            if run is None:
                raise
            await run.wait()
        return await self._start(key, begin, approver, hold, True)

    async def resume(
        self,
        tenant: str,
        agent: str,
        session_id: str,
        *,
        approver: Approver | None = None,
        hold: bool = False,
    ) -> LiveRun:
        """Continue a paused run whose items are all decided (taken over from a dead run)."""
        key = SessionKey(tenant, agent, session_id)
        await self._recover(key)
        return await self._start(key, lambda s, a: s.resume(approver=a), approver, hold, False)

    async def compact(self, tenant: str, agent: str, session_id: str) -> LiveRun:
        """Compact the session's history now (a run of its own)."""
        key = SessionKey(tenant, agent, session_id)
        return await self._start(key, lambda s, a: s.compact(), None, False, True)

    async def _start(
        self,
        key: SessionKey,
        begin: Callable[[Session, Approver], Run],
        approver: Approver | None,
        hold: bool,
        kept: bool,
    ) -> LiveRun:
        ending = self.live.get(key)
        if ending is not None and ending.done is not None:  # its `done` is out: it is ending
            await ending.finished.wait()
        self.live.check_idle(key)
        session = await self._session(key, kept=kept)
        journal = session.journal
        assert isinstance(journal, LogJournal)
        journal.agents = self.agents  # (its approver races the log: `open`)
        follower = self.live.attach(key) if hold else None
        try:
            run = begin(session, approver or held(self.live, self.log, key))
            live = self.live.start(key, session, run, self._after)
            live.held = follower
            await live.started()
        except BaseException:
            if follower is not None:
                follower.close()
            raise
        return live

    async def _after(self, live: LiveRun) -> None:
        """A run ended: its session is kept for the next one. Paused, with its items all decided
        meanwhile (a decision that came while it was pausing, or while its approver deferred),
        it resumes here at once."""
        self._keep(live)
        if self._closing or live.done is None or live.done.stop_reason != "paused":
            return
        if await open_under(self.log, live.key):
            return
        with contextlib.suppress(SessionBusy, StaleWriter):
            await self.resume(live.key.tenant, live.key.agent, live.key.id)

    # ---- decisions -------------------------------------------------------------------------------

    async def resolve(
        self,
        tenant: str,
        pending_id: str,
        decision: Approval | Answer,
        *,
        approver: Approver | None = None,
        hold: bool = False,
        resume: bool = True,
        claimed: str | None = None,
    ) -> Resolved:
        """Record a decision on a pending item — an `Approval` (with edited arguments, vetted)
        or an `Answer` — and, when nothing under its top-level session is left open, make sure
        the run goes on: a run of this process waiting on the item wakes by itself (so does
        one elsewhere); a run still pausing resumes when it has paused; a paused session with
        no live run resumes here, with `approver` and `hold` as `send` takes them (not with
        `resume=False`: then the answer is `waiting` with nothing outstanding). `UnknownPending`
        for an unknown or foreign id. `decision.by` is who the door authenticated; `claimed`, a
        name the caller gave, is kept in the decision's note (`decisions.noted`)."""
        owner = await owner_of(self.log, self.agents, tenant, pending_id)
        if await self._recover(owner.root):  # a dead run's item: closed, not resumable
            owner = await owner_of(self.log, self.agents, tenant, pending_id)
        before = (await self.log.session(owner.root)).last_seq
        outcome = await record(self.log, owner, decision, self.settings.toolsets, claimed)
        outstanding = await open_under(self.log, owner.root)
        if outcome.status != "resolved":
            late = None  # (a decision that came first, never acted on, is now: `ending`)
            if outcome.status == "already_resolved" and resume:
                late = await self.act_on(owner.root, approver, hold)
            status, error = outcome.status, outcome.error
            return Resolved(status, outcome.item, owner.root, outstanding, late, error, before)
        if outstanding or not resume:
            return Resolved("waiting", outcome.item, owner.root, outstanding, before=before)
        live = self.live.get(owner.root)
        if live is None:
            try:
                root = owner.root
                live = await self.resume(
                    root.tenant, root.agent, root.id, approver=approver, hold=hold
                )
            except (SessionBusy, StaleWriter):
                live = self.live.get(owner.root)  # resumed by someone else (here or elsewhere)
        return Resolved("resumed", outcome.item, owner.root, [], live, before=before)

    async def act_on(self, key: SessionKey, asker: Approver | None, hold: bool) -> LiveRun | None:
        """Resume a session that is decided, not acted on (`ending`): its run here, or None.
        A resumer that died after its claim left the session `interrupted`: recovered first."""
        await self._recover(key)
        if not await decided(self.log, self.live, key):
            return None
        try:
            return await self.resume(key.tenant, key.agent, key.id, approver=asker, hold=hold)
        except (SessionBusy, StaleWriter):
            return None  # (resumed meanwhile, here or elsewhere)

    async def went_on(self, key: SessionKey, after: int) -> ev.Done | None:
        """The `done` of the run that goes on for the top-level session `key` after a decision
        logged past seq `after` (`Resolved.before`): a run here or elsewhere, taken over here
        once its process died and its lease expired (`ending`); None when nothing can go on."""
        every = self.settings.lease_seconds / 3
        return await went_on(self.log, self.live, key, after, every, self.take_over)

    async def take_over(self, key: SessionKey) -> LiveRun | None:
        """The run that goes on for a session whose run died in another process, here: a run
        that died waiting on a human is logged paused on its items (`LogJournal.recover`) and,
        when every one of them is decided, resumed here; None when nothing can go on (what is
        left is open, or the dead run's batch was recovered: its next message shows it)."""
        await self._recover(key)
        if await open_under(self.log, key):
            return None
        try:
            return await self.resume(key.tenant, key.agent, key.id)
        except (SessionBusy, StaleWriter):
            return self.live.get(key)  # (resumed meanwhile, here or elsewhere; or not paused)

    async def _recover(self, key: SessionKey) -> bool:
        """Close what a dead run of the session left open (see `LogJournal.recover`); whether
        it had died."""
        if self.live.get(key) is not None or key.agent not in self.agents:
            return False
        if (await self.log.session(key)).status != "interrupted":
            return False
        session = await self.open(key)
        assert isinstance(session.journal, LogJournal)
        with contextlib.suppress(SessionBusy):  # taken over meanwhile: by a run that recovers
            await session.journal.recover(session)
        return True

    # ---- a live run ------------------------------------------------------------------------------

    def cancel(self, key: SessionKey) -> bool:
        """Cancel the session's run in this process; False when none runs here."""
        live = self.live.get(key)
        if live is None:
            return False
        live.session.cancel()
        return True

    async def cancel_run(self, key: SessionKey, *, wait: float = CONTROL_WAIT) -> bool:
        """Cancel the session's run wherever it executes, and wait (at most `wait` seconds)
        until it recorded its end: True when it ended cancelled (or took the cancel and is
        still ending when the wait runs out), False when no run held the session or it ended
        otherwise (see `controls`); then what was queued for its next run is dropped, logged
        (`steering:cleared`) before this returns. `UnknownSession`."""
        live = self.live.get(key)
        if live is None:
            if await cancel_elsewhere(self.log, key, wait):
                return True
            with contextlib.suppress(SessionBusy):  # (a run began meanwhile: it goes on)
                if (await self.open(key)).state.queued:
                    await log_for_next_run(self.log, key, self.settings, ev.SteeringCleared())
            return False
        live.session.cancel()  # (past its `done`: it drops what is queued, logged once it let go)
        try:
            await asyncio.wait_for(live.finished.wait(), wait)
        except TimeoutError:
            return True
        await live.journal.flushed()
        return live.done is not None and live.done.stop_reason == "aborted"

    async def steer(self, key: SessionKey, text: str, *, wait: float = CONTROL_WAIT) -> None:
        """Deliver `text` at the next step boundary of the session's run — here, or in another
        process (waiting at most `wait` seconds for it to take it) — or at the start of its
        next run (logged now, so a crash does not lose it). `SessionBusy` when a run in another
        process holds the session and did not take it in time."""
        await self._queue(key, text, "steer", wait)

    async def follow_up(self, key: SessionKey, text: str, *, wait: float = CONTROL_WAIT) -> None:
        """Deliver `text` when the session's run would otherwise stop (or with its next run)."""
        await self._queue(key, text, "follow_up", wait)

    async def _queue(
        self, key: SessionKey, text: str, mode: Literal["steer", "follow_up"], wait: float
    ) -> None:
        live = self.live.get(key)
        if live is not None and live.taking:
            (live.session.steer if mode == "steer" else live.session.follow_up)(text)
            await live.journal.flushed()
            return
        if live is not None:  # past its `done`: the message is logged for the next run
            await live.finished.wait()
        await queue_elsewhere(  # an unknown or foreign key fails there
            self.log,
            key,
            text,
            mode,
            wait,
            partial(log_queued, self.log, key, text, mode, self.settings),
        )

    async def close(self, timeout: float = 5.0) -> None:
        """Cancel the runs of this process and wait (bounded) until each has recorded its end;
        the log stays open (its owner closes it)."""
        self._closing = True
        await self.live.stop_all(timeout)
        await self.settings.toolsets.exit_all()  # (MCP servers): entered again on use
