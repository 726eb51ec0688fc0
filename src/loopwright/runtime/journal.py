"""The journal of a session kept in an event log: a run's events go to the log as it goes.

What is committed when (SPEC §7): every event but token deltas (a subagent's too), a commit at each
point that matters: the input, each pending item with the call it names (before anyone sees it),
each call's intent before it runs (with its reply: a crash before loses it, asked again) and its
result after, the run's end. A reply streaming is committed as `message:partial` every
`partial_every` seconds (each holds what came since the last, from its `offset`), so a crash leaves
carry-over. An event's seq is known once it is committed (`seq_of`; `append` returns that of the
event that made the commit).

A run holds its session under a lease renewed by a heartbeat; an expired lease is taken over by
the next run (a dead run that waited on a human is logged paused on its items; else its batch is
recovered, its items closed). A run that lost its lease (`runtime.lease`) tells its calls in
flight at once, starts no tool (not even one whose intent it committed) and ends at its next
append. At a run's end, items left open that no resumption can reach (the run was cancelled at a
prompt, or stopped before pausing) are closed too: an item is either resumable or shown closed.

A commit the store refuses (`StoreError`: full, locked, unreachable) ends the run with that
error. Any other failure of a commit (an event it cannot encode, such as one holding a lone
surrogate; a bug) took nothing: its events stay buffered, their text made valid (`state.text`),
and the run is told (`CommitFailed`): it ends with `loop:error`, committed with them (how it
commits: `commits.Committing`). Whatever failed, the run's end releases the lease.

A session opens from its newest snapshot and the events after it (`state.replay` folds them);
a run's end saves a new snapshot once `snapshot_every` events came since the last one: the run's
own state, unless others wrote to the session or a reply was cut off (the state's carry-over
may be ahead of the log's `message:partial`): then the log's, folded again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from .. import events as ev
from ..agent import Agent
from ..approvals import Answer, Approval, Approver
from ..errors import SessionBusy, UnknownPending, UnknownSession, describe
from ..gate.batch import Resolution
from ..loop.session import Session
from ..state.replay import apply
from ..state.session_state import SessionState
from ..store import SessionStatus, StaleWriter, StoredEvent, StoreError
from ..store.log import Lease, SessionKey, Store
from ..tools import Tool
from .commits import COMMIT_AT as COMMIT_AT
from .commits import CRASH_ENV as CRASH_ENV
from .commits import LEASE_ENV as LEASE_ENV
from .commits import NOT_STORED as NOT_STORED
from .commits import Committing, commits, crash_points_of_process, forwarded
from .commits import Settings as Settings
from .controls import log_later
from .decisions import Owner, chain, descend, key_of, open_under, record, skip_unreachable
from .fence import Ending, dead_ending, still_above
from .lease import deadline, keep
from .state import is_paused, read_state, refill, save_snapshot, status_of

LiveApprover = Callable[[Approver, "LogJournal"], Approver]
"""Makes the approvers of a journal's runs (`LogJournal.live`): `runtime.approvers.racing`."""

logger = logging.getLogger("loopwright.runtime")


class LogJournal(Committing):
    """A `session.Journal` writing one session's runs to an `EventLog` under a lease."""

    def __init__(
        self,
        log: Store,
        agent: Agent,
        key: SessionKey,
        settings: Settings,
        *,
        parent: SessionKey | None = None,
    ) -> None:
        self.log = log
        self.agent = agent
        self.tools: dict[str, Tool] = agent._by_name  # live toolsets update it in place
        self.key = key
        self.settings = settings
        self.parent = parent
        self.lease: Lease | None = None
        self.stale: StaleWriter | None = None
        """Set once the lease was lost (`lose`): the run ends at its next append."""
        self.deadline = 0.0
        """When the lease may have expired, by `settings.clock` (`runtime.lease`)."""
        self.loaded_seq = 0
        """The log's last seq when the session's history was read from it (-1: reread)."""
        self.last_seq = 0
        """The last seq this journal knows the log holds."""
        self.start_seq = 0
        """The log's last seq before the current run's first event."""
        self.snapshot_seq = 0
        """The seq of the session's newest snapshot, as far as this journal knows."""
        self.seqs: dict[int, int] = {}
        """id(event) → its seq, for the events of the current run the log holds."""
        self.held: list[ev.Event] = []  # (`Committing.held`)
        self.on_foreign: Callable[[list[StoredEvent]], None] | None = None
        """Called with events others appended to the session during the run (decisions)."""
        self.buffer, self.encoded = [], {}  # (typed in `Committing`)
        self.partial: list[str] = []
        """The deltas of the reply streaming that no `message:partial` holds yet."""
        self.streamed = 0
        """The characters of the reply streaming that its `message:partial`s hold."""
        self.last_commit = 0.0
        self.crash = crash_points_of_process()
        self._session: Session | None = None
        self._lock = asyncio.Lock()
        self.agents: Mapping[str, Agent] = {agent.name: agent}
        """The agents a decision on this session's items is vetted with (a runtime's all)."""
        self.live_approver: LiveApprover | None = None
        """Makes its runs' approvers (see `live`): None, the approver a run is given as it is."""
        self._heartbeat: asyncio.Task[None] | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self.children: dict[str, LogJournal] = {}
        """Subagent session id → the journal of a child session a run of this one used."""
        self.above: LogJournal | None = None  # (a child's: its parent's, `fence.still_above`)

    # ---- the run's side ----------------------------------------------------------------------

    async def begin(self, session: Session, input: str | None) -> None:
        await self.flushed()  # (what was logged between runs goes first)
        self._session, self.stale, self.seqs, self.held = session, None, {}, []
        self.partial, self.streamed = [], 0  # a reply cut off in the last run is not this run's
        ttl, asked = self.settings.lease_seconds, self.settings.clock()
        claimed = await self.log.claim(self.key, self.settings.owner, ttl=ttl, parent=self.parent)
        lease, self.last_seq = claimed.lease, claimed.last_seq
        try:
            await still_above(self.log, self.above, ttl)  # (a child: its parent's run holds)
            if claimed.died or claimed.last_seq != self.loaded_seq:
                had_checkpoint = is_paused(session.state)
                refill(session.state, await self.load(died=claimed.died), session.unlogged())
                if claimed.died:
                    paused = await self.pause_dead_run(lease, session)
                    await self.close_unreachable(
                        session, "recovery", "its run died", everywhere=True
                    )
                    self.last_seq = (await self.log.session(self.key)).last_seq
                    if paused:  # (this run was started on the session as it was before)
                        raise SessionBusy(
                            f"session {self.key.id}: its run died waiting on pending items "
                            f"({', '.join(paused)}), paused on them now: resolve them, then resume"
                        )
                if input is None and had_checkpoint and not is_paused(session.state):
                    raise StaleWriter(
                        f"session {self.key.id}: the paused run was finished elsewhere"
                    )
        except BaseException:
            with contextlib.suppress(StoreError):
                await self.log.release(lease, status_of(session.state))
            raise
        self.lease, self.start_seq = lease, self.last_seq
        self.deadline = deadline(self.settings, asked)
        self._heartbeat = asyncio.get_running_loop().create_task(keep(self))

    async def append(self, session_id: str, event: ev.Event) -> int | None:
        if self.stale is not None:
            raise self.stale
        kind = event.type
        if kind in NOT_STORED or (  # a subagent's deltas no more than the run's own
            isinstance(event, ev.SubagentEvent) and forwarded(event).type in NOT_STORED
        ):
            if kind == "text:delta":
                self.partial.append(event.delta)  # type: ignore[union-attr]
                due = time.monotonic() - self.last_commit >= self.settings.partial_every
                if due and not self._lock.locked():
                    await self._commit(self._partial())
            return None
        if kind == "message:completed":
            self.partial, self.streamed = [], 0
            self.encode(event)  # (committed with what follows it)
        elif kind == "loop:error" and self.partial:  # the run keeps all it streamed: so does
            self.buffer.append(self._partial())  # the log (`loop:aborted` carries its own)
        self.buffer.append(event)
        if kind in COMMIT_AT or (isinstance(event, ev.SubagentEvent) and commits(event)):
            await self._commit()
            if kind == "tool:started" and self.settings.clock() >= self.deadline:
                self.stale = StaleWriter(f"session {self.key.id}: its lease's deadline passed")
                logger.warning("%s: the call is not started", self.stale)
                raise self.stale  # (no call is in flight as a batch starts)
            return self.seqs.get(id(event))
        return None

    def lose(self, why: StaleWriter) -> None:
        """The lease is lost (`runtime.lease`): the run ends at its next append, and its calls
        in flight are told at once (`Session.cancel`)."""
        self.stale = why
        logger.warning("%s: the run stops", why)
        if self._session is not None:
            self._session.cancel()

    def record(self, event: ev.Event, *, between_runs: bool = False) -> bool:
        if self.stale is not None or (self.lease is None and not between_runs):
            return False
        if self.lease is None:  # no run here holds the session: logged under a lease of its own
            flush = log_later(self.log, self.key, self.settings, event, self._lock)
        else:
            self.buffer.append(event)
            if self._session is not None:
                apply(self._session.state, event)
            flush = self._flush()
        self._flushes.add(task := asyncio.get_running_loop().create_task(flush))
        task.add_done_callback(self._flushes.discard)
        return True

    async def flushed(self) -> None:
        """Wait until what `record` took is committed, or failed to be (logged)."""
        await asyncio.gather(*self._flushes, return_exceptions=True)

    async def end(self, session: Session, stop_reason: ev.RunStopReason | None) -> None:
        """Commit what is left, close what became unreachable, release the lease whatever
        failed; a failure here (a full or locked database) or a run stopped without its `done`
        logged leaves the session `interrupted`; after a takeover, nothing is written."""
        lease = self.lease
        if lease is None:
            self._session = None
            return
        status: SessionStatus = "paused" if stop_reason == "paused" else "idle"
        try:
            await self._stop_heartbeat()
            if self.stale is None:
                await self._commit()
            if self.stale is None and stop_reason is not None:
                why = f"the run ended ({stop_reason}) before a decision"
                await self.close_unreachable(session, "loopwright", why)
                if self.last_seq - self.snapshot_seq >= self.settings.snapshot_every:
                    await self._save_snapshot(lease, session)
        except StaleWriter:
            pass
        except Exception as exc:  # whatever failed, the lease is released
            logger.warning("session %s: could not finish its log: %s", self.key.id, describe(exc))
            status = "interrupted"
        except asyncio.CancelledError:  # (a cancel as the run ends, after its `done`: what is
            if self.buffer:  # left uncommitted is the next run's to recover) and the lease
                status = "interrupted"  # is released all the same, below
            raise
        finally:  # (the session let go: it holds this journal, which would make a cycle)
            self.lease, self.buffer, self._session = None, [], None
            if stop_reason is None:
                status = "interrupted"  # the run stopped without its `done` (an exception)
            if self.stale is None:
                try:
                    async with self._lock:  # (what is logged between runs waits for it)
                        await self.log.release(lease, status)
                except Exception as exc:  # its lease expires: the next run takes it over
                    logger.warning("session %s: lease not released: %s", self.key.id, describe(exc))

    async def recover(self, session: Session, ending: Ending | None = None) -> None:
        """Take over a session whose run died (its lease expired before its `done`) without
        running: the dead run's items no resumption can reach are closed; its unfinished batch
        stays for the next run to recover, or `ending` closes it now (`fence.abandoned`)."""
        ttl = self.settings.lease_seconds
        claimed = await self.log.claim(self.key, self.settings.owner, ttl=ttl, parent=self.parent)
        try:
            if claimed.died:
                refill(session.state, await self.load(died=True))
                await self.pause_dead_run(claimed.lease, session)
                await self.close_unreachable(session, "recovery", "its run died", everywhere=True)
            if ending is not None and (events := ending(session)):
                await self.log.append(claimed.lease, events)
                refill(session.state, await self.load(died=False))
        finally:
            await self.log.release(claimed.lease, status_of(session.state))

    async def pause_dead_run(self, lease: Lease, session: Session) -> list[str]:
        """The items the run that died was waiting on, if it was (`fence.dead_ending`): the pause
        its live approver's deferral would have logged is logged now, under `lease`, and the
        session is read again, paused: its items stay open (P4), resumed by a decision (any)."""
        ending = await dead_ending(self, session)  # (`fence`: its subagents died with it)
        if ending is None:
            return []
        await self.log.append(lease, ending)
        refill(session.state, await self.load(died=False), session.unlogged())
        paused = ending[-2]
        return paused.pending_ids if isinstance(paused, ev.LoopPaused) else []

    async def catch_up(self) -> None:
        """Hand over what others appended to the session since the last commit (a decision a
        live approver waited for), before the run goes on."""
        if self.lease is None or self.on_foreign is None:
            return
        async with self._lock:
            if self.lease is not None:
                foreign = await self.log.read(self.key, after=self.last_seq)
                if foreign:
                    self._foreign(foreign)
                    self.last_seq = foreign[-1].seq

    # ---- opening -----------------------------------------------------------------------------

    async def load(self, *, died: bool) -> SessionState:
        """The session's state from its log (`died`: its last run stopped before `done`): its
        newest snapshot and the events after it, folded by the reducer."""
        if self.agent._live:  # a paused call of a live toolset needs its tool to resume
            await self.agent.refresh_tools(self.settings.toolsets)
        read = await read_state(self.log, self.key, self.tools, died=died, agent=self.agent)
        state, self.loaded_seq, self.snapshot_seq = read
        self.last_seq = self.loaded_seq
        return state

    async def _save_snapshot(self, lease: Lease, session: Session) -> None:
        """A snapshot is an optimisation: failing to keep one never fails the run."""
        mine = self.loaded_seq == self.last_seq and not (self.partial or self.buffer)
        live = (session.state, self.last_seq) if mine and not self._flushes else None
        try:
            self.snapshot_seq = await save_snapshot(self.log, lease, self.tools, live)
        except StaleWriter:
            raise
        except Exception as exc:
            logger.warning("session %s: no snapshot kept: %r", self.key.id, exc)

    async def resolve(
        self, session: Session, pending_id: str, approval: Approval | Answer
    ) -> Resolution:
        item = await self.log.pending_item(self.key.tenant, pending_id)
        keys = await chain(self.log, key_of(item))
        if self.key not in keys:
            raise UnknownPending(f"no pending item {pending_id!r} in session {self.key.id}")
        mine = keys[: keys.index(self.key) + 1]
        owner = Owner(item, keys[0], descend(self.agent, mine), keys[-1], self.agent)
        outcome = await record(self.log, owner, approval, session.toolsets)
        checkpoint = session.state.checkpoint
        if checkpoint is not None and pending_id in checkpoint.pending:  # the state takes the
            for stored in await self.log.read(self.key, after=self.last_seq):  # log's record
                if isinstance(stored.event, ev.PendingDecided):
                    apply(session.state, stored.event)
        left = len(await open_under(self.log, keys[-1]))
        return Resolution(outcome.status, left, outcome.error)

    def live(self, approver: Approver) -> Approver:
        """`approver`, answering with the decision the log records first (a decision made
        elsewhere overtakes a prompt: `runtime.approvers.authoritative`)."""
        if getattr(approver, "authoritative", False) or self.live_approver is None:
            return approver  # (a parent's, passed on to its subagent's run)
        return self.live_approver(approver, self)

    async def child(self, parent: Session, agent: Agent, session_id: str) -> Session:
        key = SessionKey(self.key.tenant, agent.name, session_id)
        child = await session_in_log(
            self.log, agent, key, self.settings, parent=self.key, live_approver=self.live_approver
        )
        journal = child.journal
        assert isinstance(journal, LogJournal)
        journal.agents, journal.above = self.agents, self
        self.children[session_id] = journal
        return child

    def tree(self) -> list[SessionKey]:
        """This session and the subagent sessions its runs used (as far as this process knows)."""
        return [self.key, *(k for c in self.children.values() for k in c.tree())]

    async def close_unreachable(
        self, session: Session, by: str, why: str, *, everywhere: bool = False
    ) -> None:
        """Skip the open items under this session that no resumption can reach: those that are
        neither in the paused batch nor under a subagent session the batch waits on. Items are
        looked for in the sessions this journal's runs used; `everywhere`, in every session
        under this one (a dead run's, which this process did not see)."""
        keys = None if everywhere else self.tree()
        await skip_unreachable(self.log, self.key, session.state.checkpoint, keys, by, why)

    async def _stop_heartbeat(self) -> None:
        beat, self._heartbeat = self._heartbeat, None
        if beat is not None:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)


async def session_in_log(
    log: Store,
    agent: Agent,
    key: SessionKey,
    settings: Settings,
    *,
    parent: SessionKey | None = None,
    live_approver: LiveApprover | None = None,
) -> Session:
    """A session kept in the log: its history is read from the log (nothing when new)."""
    journal = LogJournal(log, agent, key, settings, parent=parent)
    journal.live_approver = live_approver
    session = Session(
        agent,
        session_id=key.id,
        tenant=key.tenant,
        journal=journal,
        **settings.of_sessions(),
    )
    try:
        record = await log.session(key)
    except UnknownSession:
        return session
    refill(session.state, await journal.load(died=record.status == "interrupted"))
    checkpoint = session.state.checkpoint
    for waiting in checkpoint.suspended.values() if checkpoint else ():
        if waiting.tool.subagent is not None:  # so that its items are this session's too
            await session.child(waiting.tool.subagent, waiting.session_id)
    return session
