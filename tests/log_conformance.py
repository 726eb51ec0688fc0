"""The store's conformance suite, part one: the writer's side (seqs, atomic batches, leases,
session names, snapshots, closing) and the listings. The other parts: decisions, derived rows
and following (`log_conformance_decisions.py`), controls, read models, usage, the outbox
(`log_conformance_*.py`).

`test_log_conformance.py` runs every part once per backend (SQLite, PostgreSQL) with the fixture
`make_log`: an async factory `await make_log(clock=None)` that opens one more instance of the
backend on the same storage (a fresh storage per test), with `clock` (Unix seconds) when given,
and closes every instance it opened at teardown. Two instances stand for two processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from loopwright import events as ev
from loopwright.errors import SessionBusy, UnknownPending, UnknownSession
from loopwright.messages import AssistantMessage, Text, Usage, UserMessage
from loopwright.store import StaleWriter, StoreError
from loopwright.store.log import Decided, SessionKey, Snapshot, Store, Verdict

MakeLog = Callable[..., Awaitable[Store]]
KEY = SessionKey("acme", "support", "order-1001")
SAFETY = 60  # seconds: a safety net that never decides a result


class Clock:
    """An injected clock (Unix seconds) that moves only when told."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def decide(
    log: Store, pending_id: str, status: Any, by: str = "ann", **given: Any
) -> Decided:
    return await log.decide("acme", pending_id, Verdict(status, by, **given))


def said(text: str) -> ev.InputReceived:
    return ev.InputReceived(message=UserMessage(content=text))


def reply(text: str = "ok", usage: Usage | None = None) -> ev.MessageCompleted:
    message = AssistantMessage(parts=(Text(text=text),), usage=usage, model="scripted:m")
    return ev.MessageCompleted(message=message)


def approval(pending_id: str, **args: Any) -> ev.ApprovalPending:
    scope = ev.Scope(tenant="acme", environment="prod", agent="support")
    return ev.ApprovalPending(
        id=pending_id,
        tool="refund",
        args=args,
        scope=scope,
        reason="refunds need a human",
        requested_at="2026-01-01T00:00:00.000Z",
    )


async def test_seqs_are_gapless_and_events_round_trip(make_log: MakeLog) -> None:
    log = await make_log()
    claimed = await log.claim(KEY, "run-1", ttl=30)
    assert (claimed.lease.epoch, claimed.died, claimed.last_seq) == (1, False, 0)
    batches = [[said("hello")], [reply("a"), said("b"), reply("c")], [], [said("d")]]
    lasts = [await log.append(claimed.lease, batch) for batch in batches]
    assert lasts == [1, 4, 4, 5]
    stored = await log.read(KEY)
    assert [s.seq for s in stored] == [1, 2, 3, 4, 5]
    assert [s.event for s in stored] == [e for batch in batches for e in batch]
    assert [s.seq for s in await log.read(KEY, after=2, limit=2)] == [3, 4]
    assert await log.read(KEY, after=5) == []
    assert (await log.session(KEY)).last_seq == 5
    await log.release(claimed.lease, "idle")
    again = await log.claim(KEY, "run-2", ttl=30)
    assert (again.lease.epoch, again.died, again.last_seq) == (2, False, 5)
    assert await log.append(again.lease, [said("e")]) == 6


async def test_a_batch_is_atomic(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("hi"), reply(), approval("p-1")])
    with pytest.raises(StoreError):  # the same pending id twice: the whole batch fails
        await log.append(lease, [said("x"), reply("y"), approval("p-2"), approval("p-1")])
    assert [s.seq for s in await log.read(KEY)] == [1, 2, 3]
    assert (await log.session(KEY)).last_seq == 3
    page = await log.pending("acme")
    assert [p.id for p in page.items] == ["p-1"]
    assert (await log.usage("acme"))["requests"] == 0
    assert await log.append(lease, [said("z")]) == 4


async def test_claim_is_busy_while_an_unexpired_lease_holds_the_session(
    make_log: MakeLog,
) -> None:
    clock = Clock(1_000_000.0)
    log, other = await make_log(clock=clock), await make_log(clock=clock)
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    assert lease.expires == 1_000_030.0
    clock.advance(20)
    for contender, owner in ((other, "run-2"), (log, "run-1")):  # the same owner too
        with pytest.raises(SessionBusy, match=r"until 1970-01-12T13:47:10\.000Z"):
            await contender.claim(KEY, owner, ttl=30)
    lease = await log.renew(lease, ttl=30)  # the heartbeat
    assert lease.expires == 1_000_050.0
    clock.advance(25)  # past the first expiry, not the renewed one
    with pytest.raises(SessionBusy, match=r"until 1970-01-12T13:47:30\.000Z"):
        await other.claim(KEY, "run-2", ttl=30)
    record = await other.session(KEY)
    assert (record.status, record.lease_owner, record.lease_expires) == (
        "running",
        "run-1",
        1_000_050.0,
    )


async def test_an_expired_lease_is_taken_over_and_the_old_one_is_refused(
    make_log: MakeLog,
) -> None:
    clock = Clock()
    log, other = await make_log(clock=clock), await make_log(clock=clock)
    old = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(old, [said("hi")])
    clock.advance(30)  # expired (expiry is not "still held")
    assert (await other.session(KEY)).status == "interrupted"
    taken = await other.claim(KEY, "run-2", ttl=30)
    assert (taken.lease.epoch, taken.died, taken.last_seq) == (2, True, 1)
    with pytest.raises(StaleWriter):
        await log.append(old, [said("late")])
    with pytest.raises(StaleWriter):
        await log.renew(old, ttl=30)
    with pytest.raises(StaleWriter):
        await log.release(old, "idle")
    with pytest.raises(StaleWriter):
        await log.save_snapshot(old, Snapshot(1, "{}"))
    assert [s.event for s in await log.read(KEY)] == [said("hi")]
    record = await log.session(KEY)
    assert (record.status, record.lease_owner) == ("running", "run-2")
    assert await other.append(taken.lease, [said("again")]) == 2
    await other.release(taken.lease, "idle")
    with pytest.raises(StaleWriter):  # released: the lease is spent
        await other.append(taken.lease, [said("after")])
    record = await log.session(KEY)
    assert (record.status, record.lease_owner, record.lease_expires) == ("idle", None, None)
    third = await log.claim(KEY, "run-3", ttl=30)
    assert (third.lease.epoch, third.died) == (3, False)


async def test_a_closed_instance_refuses_calls_and_its_commits_stay(make_log: MakeLog) -> None:
    log, other = await make_log(), await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    assert await log.append(lease, [said("hi"), reply()]) == 2
    await log.close()
    await log.close()  # twice: nothing more happens
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: log.read(KEY),
        lambda: log.append(lease, [said("late")]),
        lambda: log.session(KEY),
        lambda: log.claim(SessionKey("acme", "support", "other"), "run-2", ttl=30),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="the log is closed"):
            await call()
    assert [s.event for s in await other.read(KEY)] == [said("hi"), reply()]
    assert (await other.session(KEY)).lease_owner == "run-1"  # closing released nothing


async def test_a_run_that_committed_its_done_did_not_die(make_log: MakeLog) -> None:
    clock = Clock()
    log = await make_log(clock=clock)
    lease = (await log.claim(KEY, "run-1", ttl=10)).lease
    await log.append(lease, [said("hi"), reply(), approval("p-1")])
    await log.append(lease, [ev.LoopPaused(pending_ids=["p-1"])])
    await log.append(lease, [ev.Done(text="", stop_reason="paused")])
    clock.advance(11)  # the process died before releasing
    assert (await log.session(KEY)).status == "paused"
    claimed = await log.claim(KEY, "run-2", ttl=10)
    assert claimed.died is False
    await log.append(claimed.lease, [said("more")])  # a run's events: running again
    clock.advance(11)
    assert (await log.session(KEY)).status == "interrupted"
    claimed = await log.claim(KEY, "run-3", ttl=10)
    assert claimed.died is True
    await log.release(claimed.lease, "interrupted")  # a run that failed says so
    assert (await log.session(KEY)).status == "interrupted"
    assert (await log.claim(KEY, "run-4", ttl=10)).died is True


async def test_ids_belong_to_tenant_and_agent(make_log: MakeLog) -> None:
    log = await make_log()
    keys = [
        SessionKey("acme", "support", "order-1"),
        SessionKey("acme", "billing", "order-1"),
        SessionKey("globex", "support", "order-1"),
    ]
    for number, key in enumerate(keys, start=1):
        claimed = await log.claim(key, f"run-{number}", ttl=30)
        assert (claimed.lease.epoch, claimed.died) == (1, False)  # a new session each time
        await log.append(claimed.lease, [said(f"from {key.tenant}/{key.agent}")] * number)
        await log.append(claimed.lease, [said("hi"), reply(), approval(f"p-{number}")])
    for number, key in enumerate(keys, start=1):
        stored = await log.read(key)
        assert [s.seq for s in stored] == list(range(1, number + 4))
        assert stored[0].event == said(f"from {key.tenant}/{key.agent}")
        assert (await log.session(key)).key == key
    assert [p.id for p in (await log.pending("acme")).items] == ["p-1", "p-2"]
    assert [p.agent for p in (await log.pending("acme", agent="billing")).items] == ["billing"]
    assert [p.id for p in (await log.pending("globex")).items] == ["p-3"]
    assert {s.key for s in (await log.sessions("acme")).items} == set(keys[:2])

    foreign = SessionKey("initech", "support", "order-1")  # order-1 exists, not for initech
    unused = SessionKey("initech", "support", "order-2")
    reads: list[Callable[[SessionKey], Awaitable[object]]] = [
        log.read,
        log.session,
        log.snapshot,
        lambda key: log.usage(key.tenant, key=key),
    ]
    for call in reads:
        with pytest.raises(UnknownSession) as foreign_error:
            await call(foreign)
        with pytest.raises(UnknownSession) as unused_error:
            await call(unused)
        assert str(foreign_error.value) == str(unused_error.value).replace("order-2", "order-1")
    assert (await log.pending("initech", session=foreign)).items == []
    assert (
        await log.pending("acme", session=SessionKey("globex", "support", "order-1"))
    ).items == []

    with pytest.raises(UnknownPending) as foreign_item:
        await log.pending_item("globex", "p-1")
    with pytest.raises(UnknownPending) as unused_item:
        await log.pending_item("globex", "p-9")
    assert str(foreign_item.value) == str(unused_item.value).replace("p-9", "p-1")
    with pytest.raises(UnknownPending):
        await log.wait_decided("globex", "p-1")


async def test_snapshots_keep_the_newest_under_the_lease(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    assert await log.snapshot(KEY) is None
    await log.append(lease, [said(str(n)) for n in range(6)])
    await log.save_snapshot(lease, Snapshot(2, '{"at": 2}'))
    assert await log.snapshot(KEY) == Snapshot(2, '{"at": 2}')
    await log.save_snapshot(lease, Snapshot(5, '{"at": 5}'))
    await log.save_snapshot(lease, Snapshot(3, '{"at": 3}'))  # older: the newest stays
    assert await log.snapshot(KEY) == Snapshot(5, '{"at": 5}')
    with pytest.raises(StoreError):
        await log.save_snapshot(lease, Snapshot(7, "{}"))  # past the log's end
    other = await make_log()
    assert await other.snapshot(KEY) == Snapshot(5, '{"at": 5}')
    with pytest.raises(UnknownSession):
        await log.snapshot(SessionKey("acme", "support", "nope"))


async def test_a_subagent_session_records_its_parent(make_log: MakeLog) -> None:
    log = await make_log()
    await log.claim(KEY, "run-1", ttl=30)
    child = SessionKey("acme", "billing", "order-1001/billing/call-1")
    await log.claim(child, "run-1", ttl=30, parent=KEY)
    assert (await log.session(child)).parent == KEY
    assert (await log.session(KEY)).parent is None
    with pytest.raises(UnknownSession):
        missing = SessionKey("acme", "support", "missing")
        await log.claim(SessionKey("acme", "billing", "x"), "run-1", ttl=30, parent=missing)
    with pytest.raises(UnknownSession):  # another tenant's session is no parent
        await log.claim(SessionKey("globex", "billing", "x"), "run-1", ttl=30, parent=KEY)
    with pytest.raises(UnknownSession):  # nothing was created by the refused claims
        await log.session(SessionKey("acme", "billing", "x"))


async def test_sessions_page_most_recently_updated_first(make_log: MakeLog) -> None:
    clock = Clock()
    log = await make_log(clock=clock)
    leases = {}
    for n in range(5):
        agent = "billing" if n % 2 else "support"
        key = SessionKey("acme", agent, f"s-{n}")
        leases[key.id] = (await log.claim(key, "run", ttl=300)).lease
        clock.advance(1)
    await log.append(leases["s-1"], [said("touch")])  # s-1 is now the most recent
    seen, cursor = [], None
    while True:
        page = await log.sessions("acme", limit=2, cursor=cursor)
        assert len(page.items) <= 2
        seen += [s.key.id for s in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == ["s-1", "s-4", "s-3", "s-2", "s-0"]
    billing = await log.sessions("acme", "billing", limit=10)
    assert ([s.key.id for s in billing.items], billing.cursor) == (["s-1", "s-3"], None)
    assert (await log.sessions("globex")).items == []


async def test_pending_pages_in_request_order(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    other = SessionKey("acme", "billing", "order-1002")
    other_lease = (await log.claim(other, "run-2", ttl=30)).lease
    for n in range(3):
        await log.append(lease, [reply(), approval(f"a-{n}")])
        await log.append(other_lease, [reply(), approval(f"b-{n}")])
    await decide(log, "b-1", "approved")
    ids, cursor = [], None
    while True:
        page = await log.pending("acme", limit=2, cursor=cursor, status=None)
        ids += [p.id for p in page.items]
        if (cursor := page.cursor) is None:
            break
    assert ids == ["a-0", "b-0", "a-1", "b-1", "a-2", "b-2"]
    open_items = await log.pending("acme")
    assert [p.id for p in open_items.items] == ["a-0", "b-0", "a-1", "a-2", "b-2"]
    approved = await log.pending("acme", status="approved")
    assert [p.id for p in approved.items] == ["b-1"]
    first = await log.pending("acme", session=other, limit=1)
    assert [p.id for p in first.items] == ["b-0"]
    rest = await log.pending("acme", session=other, limit=5, cursor=first.cursor)
    assert ([p.id for p in rest.items], rest.cursor) == (["b-2"], None)


def safely(awaitable: Awaitable[Any]) -> Awaitable[Any]:
    """A safety net for a wait that must end by itself."""
    return asyncio.wait_for(awaitable, SAFETY)


@pytest.mark.parametrize("cursor", ["x", "-1", "1.5", "9" * 19, "٣", "abc:2026", ":", "1"])
async def test_a_cursor_the_log_did_not_give_is_refused(make_log: MakeLog, cursor: str) -> None:
    """`ValueError`, never a backend's own error (a sessions cursor is `<row>:<updated at>`, a
    pending one a row: "1" is a fine pending cursor)."""
    log = await make_log()
    await log.claim(KEY, "run-1", ttl=30)
    with pytest.raises(ValueError, match="is not one this log gave"):
        await log.sessions("acme", cursor=cursor)
    if cursor == "1":
        assert (await log.pending("acme", cursor=cursor)).items == []
        return
    with pytest.raises(ValueError, match="is not one this log gave"):
        await log.pending("acme", cursor=cursor)
