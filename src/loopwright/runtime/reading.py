"""What the doors read, through the runtime (the HTTP routes, the CLI, the editor adapter and
notifications import only value types from the store): a session's events (followed live
across pauses), its latest turn, its pending items (those of a dead run closed first, so that
none is listed open that could not be resumed), a pending item, usage, sessions, notification
deliveries.

`Reading` is the part of `Runtime` that reads; the runtime closes what a dead run left open
(`_recover`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from .. import events as ev
from ..loop.session import Session
from ..state.snapshots import encoded
from ..store import PendingRecord, PendingStatus, StoredEvent
from ..store.log import Page, SessionKey, SessionRecord, Store
from ..store.outbox import Outbox, outbox_of
from ..store.usage_report import UsageQuery
from ..wire import messages_to_json
from . import follow as following
from .decisions import chain, key_of, open_under
from .follow import Item
from .journal import LogJournal
from .lifecycle import Subscription
from .live import Follower, Live
from .results import stored_result


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Messages of a session's history as JSON (`Reading.history`): `text` holds the objects
    of messages `start` to `end` (exclusive) of `length`, joined by commas (redacted)."""

    text: str
    start: int
    end: int
    length: int
    agent: str
    """The agent the session is with now: its first, or the target of its last handoff."""


class Reading:
    """The reading side of a runtime over `log`, with its live runs `live`."""

    log: Store
    live: Live
    _idle: OrderedDict[SessionKey, Session]

    async def open(self, key: SessionKey) -> Session:
        """The session as its log leaves it (`Runtime.open`)."""
        raise NotImplementedError

    async def _recover(self, key: SessionKey) -> bool:
        """Close what a dead run of the session left open; whether it had died (`Runtime`)."""
        raise NotImplementedError

    async def item(self, tenant: str, pending_id: str) -> PendingRecord:
        """A pending item of `tenant`, as it stands. `UnknownPending` for an unknown or
        foreign id."""
        return await self.log.pending_item(tenant, pending_id)

    async def root_of(self, item: PendingRecord) -> SessionKey:
        """The top-level session an item belongs to (a subagent's session id nests its
        parent's; its run is the one that resumes)."""
        key = key_of(item)
        return (await chain(self.log, key))[-1] if "/" in item.session_id else key

    async def read(
        self, key: SessionKey, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """The session's stored events after seq `after` (at most `limit`). `UnknownSession`."""
        return await self.log.read(key, after=after, limit=limit)

    async def result(self, key: SessionKey, ref: str) -> str | None:
        """The whole text of a large result the session stored (`runtime.results`), or None."""
        return await stored_result(self.log, key, ref)

    async def turn(self, key: SessionKey) -> list[ev.Event]:
        """The logged events of the session's latest turn: from the `session` event of the run
        that took the last input, through every run that resumed it and the decisions between
        them (`message:partial`, stored only, left out). Read backwards in growing windows from
        the log's end: the cost is the turn's, not the session's."""
        last = (await self.log.session(key)).last_seq
        window = 64
        while True:
            after = max(0, last - window)
            events = [s.event for s in await self.log.read(key, after=after)]
            inputs = [i for i, e in enumerate(events) if e.type == "input:received"]
            anchor = inputs[-1] if inputs else len(events) - 1
            starts = [i for i in range(anchor + 1) if events[i].type == "session"]
            if (inputs and starts) or after == 0:
                start = starts[-1] if starts else 0
                return [e for e in events[start:] if e.type != "message:partial"]
            window *= 4

    async def since(self, key: SessionKey, after: int) -> list[ev.Event]:
        """The logged events of the session after seq `after` (what followed a decision),
        without `message:partial` (stored only)."""
        stored = await self.log.read(key, after=after)
        return [s.event for s in stored if s.event.type != "message:partial"]

    async def events(
        self,
        key: SessionKey,
        *,
        after: int = 0,
        follow: bool = False,
        follower: Follower | None = None,
        page: int = 1000,
    ) -> AsyncIterator[Item]:
        """The session's events after seq `after`, as (seq, event); with `follow`, then its
        runs' events as they come — live for a run here (token deltas included, with no seq),
        from the log for a run elsewhere — across pauses, up to a `done` that is not a pause
        (at once when the session's latest run has ended so). Without `follow`, the log is
        read `page` events at a time. `UnknownSession`."""
        if not follow:
            while True:
                stored = await self.log.read(key, after=after, limit=page)
                for one in stored:
                    yield one.seq, one.event
                if len(stored) < page:
                    return
                after = stored[-1].seq
        if self.live.get(key) is None:
            await self.log.session(key)  # an unknown or foreign key fails now
        async for item in following.follow(
            self.log, self.live, key, after=after, follower=follower
        ):
            yield item

    async def pending(
        self,
        tenant: str,
        *,
        agent: str | None = None,
        session: SessionKey | None = None,
        status: PendingStatus | None = "open",
    ) -> list[PendingRecord]:
        """Pending items in the order they were requested (open ones by default). Items of a
        run that died are closed first (they could never resume): none is listed open that
        could not be resolved and resumed."""
        listed = await self._pending(tenant, agent, session, status)
        if status not in ("open", None):
            return listed
        dead = False
        for root in {(await chain(self.log, key_of(p)))[-1] for p in listed if p.status == "open"}:
            dead = await self._recover(root) or dead
        return await self._pending(tenant, agent, session, status) if dead else listed

    async def pending_page(
        self,
        tenant: str,
        *,
        agent: str | None = None,
        session: SessionKey | None = None,
        status: PendingStatus | None = "open",
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        """One page of `pending` (`Page.cursor` fetches the next): the items of runs that died
        are closed first, as `pending` does."""
        page = await self.log.pending(
            tenant, agent=agent, session=session, status=status, limit=limit, cursor=cursor
        )
        if status not in ("open", None):
            return page
        dead = False
        for root in {(await chain(self.log, key_of(p)))[-1] for p in page.items}:
            dead = await self._recover(root) or dead
        if not dead:
            return page
        return await self.log.pending(
            tenant, agent=agent, session=session, status=status, limit=limit, cursor=cursor
        )

    async def outstanding(self, key: SessionKey) -> list[PendingRecord]:
        """The open items a paused session waits on: its own and its subagents' (what must be
        decided before it resumes)."""
        await self._recover(key)
        return await open_under(self.log, key)

    async def _pending(
        self,
        tenant: str,
        agent: str | None,
        session: SessionKey | None,
        status: PendingStatus | None,
    ) -> list[PendingRecord]:
        out: list[PendingRecord] = []
        cursor = None
        while True:
            page = await self.log.pending(
                tenant, agent=agent, session=session, status=status, cursor=cursor
            )
            out += page.items
            if (cursor := page.cursor) is None:
                return out

    async def history(
        self, key: SessionKey, last_seq: int, *, limit: int | None = None, end: int | None = None
    ) -> HistoryPage:
        """The session's history as JSON, as of its log's `last_seq`: from the session this
        runtime keeps after its last run when it is the log's (nothing parsed: the JSON its
        snapshots keep, `snapshots.encoded`, plus the messages since), else opened from the
        log. All of it; or, with `limit`, the `limit` messages before message `end` (None:
        the newest), a page read backwards (`ValueError` for an `end` past the history)."""
        session = self._idle.get(key)
        journal = session.journal if session is not None else None
        if session is None or not isinstance(journal, LogJournal) or journal.loaded_seq != last_seq:
            session = await self.open(key)
        history, agent = session.state.history, session.state.agent or key.agent
        length = len(history.messages)
        if limit is None:
            return HistoryPage(encoded(history).text, 0, length, length, agent)
        stop = length if end is None else end
        if not 0 <= stop <= length:
            raise ValueError(f"the history has {length} messages")
        start = max(0, stop - limit)
        text = messages_to_json(history.messages[start:stop])[1:-1]
        return HistoryPage(text, start, stop, length, agent)

    async def usage(self, tenant: str, key: SessionKey | None = None) -> dict[str, Any]:
        return await self.log.usage(tenant, key=key)

    async def usage_report(self, query: UsageQuery) -> Page:
        """Usage summed by group (`store.usage_report`): a page of groups."""
        return await self.log.usage_report(query)

    def lifecycle(self, tenant: str | None = None, key: SessionKey | None = None) -> Subscription:
        """Lifecycle notifications from now on (`runtime.lifecycle`): of `tenant`'s sessions
        (every tenant's when None), or of the session `key` only; ends as the runtime closes."""
        return self.live.lifecycle.subscribe(tenant, key)

    async def session(self, key: SessionKey) -> SessionRecord:
        """`UnknownSession` for an unknown or foreign key."""
        return await self.log.session(key)

    async def sessions(
        self, tenant: str, agent: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> Page:
        return await self.log.sessions(tenant, agent, limit=limit, cursor=cursor)

    async def deliveries(
        self, tenant: str, *, item: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page:
        """A page of the tenant's notification deliveries, newest first (`Outbox.deliveries`)."""
        return await self.outbox.deliveries(tenant, item=item, limit=limit, cursor=cursor)

    @property
    def outbox(self) -> Outbox:
        """The notifications' outbox kept with the log (the notify worker empties it)."""
        return outbox_of(self.log)
