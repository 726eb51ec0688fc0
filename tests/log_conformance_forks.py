"""The store's conformance suite: forks (`Forks.fork`, `store.forking`) — a new session whose log
is another's events up to a seq, made in one transaction, its lineage on its row, the source
untouched. Imported by each backend's test module, like the other parts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from log_conformance import KEY, Clock, MakeLog, approval, decide, reply, said
from loopwright import events as ev
from loopwright.errors import UnknownSession
from loopwright.messages import Usage
from loopwright.store.forking import CannotFork
from loopwright.store.log import Lineage, SessionKey, Store

FORK = SessionKey("acme", "support", "what-if")


async def source(log: Store) -> None:
    """KEY: a run that asked for two refunds (p-1, p-2) and paused; p-1 approved since."""
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(
        lease,
        [
            ev.Session(session_id=KEY.id),
            said("refund both orders"),
            reply("on it", Usage(input_tokens=10, output_tokens=5)),
            approval("p-1", order=1),
            ev.PendingRequested(id="p-1", call_id="c1"),
            approval("p-2", order=2),
            ev.PendingRequested(id="p-2", call_id="c2"),
            ev.LoopPaused(pending_ids=["p-1", "p-2"]),
            ev.Done(text="", stop_reason="paused"),
        ],
    )
    await log.release(lease, "paused")
    await decide(log, "p-1", "approved")  # seq 10


async def everything(log: Store, key: SessionKey) -> Any:
    """What the log says of `key`: its events, row, items and usage."""
    record = await log.session(key)
    return (
        await log.read(key),
        (record.status, record.last_seq, record.forked_from, record.updated_at),
        (await log.pending("acme", session=key, status=None)).items,
        await log.usage("acme", key=key),
    )


async def test_a_fork_copies_the_log_up_to_a_seq_and_leaves_the_source_untouched(
    make_log: MakeLog,
) -> None:
    log, other = await make_log(), await make_log()  # the fork is made in another process
    await source(log)
    before = await everything(log, KEY)
    assert await other.fork(KEY, 10, FORK.id) == FORK
    assert await everything(log, KEY) == before
    copied = await log.read(FORK)
    original = before[0]
    assert [s.seq for s in copied] == list(range(1, 11))
    old = {p.id: p for p in before[2]}
    new = {p.call_id: p for p in (await log.pending("acme", session=FORK, status=None)).items}
    ids = {p.id: new[p.call_id].id for p in old.values()}  # fresh ids, the same items
    assert set(ids) == {"p-1", "p-2"} and not set(ids.values()) & set(ids)
    renamed = [
        ev.Session(session_id=FORK.id),
        *[s.event for s in original[1:3]],
        replace(original[3].event, id=ids["p-1"]),  # type: ignore[arg-type]
        ev.PendingRequested(id=ids["p-1"], call_id="c1"),
        replace(original[5].event, id=ids["p-2"]),  # type: ignore[arg-type]
        ev.PendingRequested(id=ids["p-2"], call_id="c2"),
        ev.LoopPaused(pending_ids=[ids["p-1"], ids["p-2"]]),
        original[8].event,
        replace(original[9].event, id=ids["p-1"]),  # type: ignore[arg-type]
    ]
    assert [s.event for s in copied] == renamed
    for item, mine in ((old["p-1"], new["c1"]), (old["p-2"], new["c2"])):
        assert replace(mine, id=item.id, session_id=KEY.id) == item  # decided or open alike
    record = await log.session(FORK)
    assert (record.status, record.last_seq, record.forked_from) == (
        "paused",
        10,
        Lineage(KEY.id, 10),
    )
    assert (await log.session(KEY)).forked_from is None
    usage = await log.usage("acme", key=FORK)
    assert (usage["requests"], usage["input_tokens"]) == (0, 0)  # billed once: to the source
    assert (await log.usage("acme"))["requests"] == 1
    # the fork's open item is its own: deciding it differently leaves the source's open
    denied = await decide(other, new["c2"].id, "denied")
    assert denied.changed and denied.item.session_id == FORK.id
    assert (await log.pending_item("acme", "p-2")).status == "open"


async def test_a_fork_inside_a_run_reads_as_a_run_that_died_there(make_log: MakeLog) -> None:
    log = await make_log()
    await source(log)
    await log.fork(KEY, 4, FORK.id)  # the first approval asked, its call not yet named
    record = await log.session(FORK)
    assert (record.status, record.last_seq, record.forked_from) == (
        "interrupted",
        4,
        Lineage(KEY.id, 4),
    )
    (item,) = (await log.pending("acme", session=FORK)).items
    assert (item.call_id, item.status, item.args) == ("", "open", {"order": 1})
    claimed = await log.claim(FORK, "run-2", ttl=30)
    assert (claimed.died, claimed.last_seq, claimed.lease.epoch) == (True, 4, 1)
    assert await log.append(claimed.lease, [said("go on")]) == 5
    assert (await log.session(KEY)).last_seq == 10


async def test_a_fork_is_refused_whole_for_a_bad_source_seq_or_id(make_log: MakeLog) -> None:
    log = await make_log()
    await source(log)
    before = await everything(log, KEY)
    for at in (0, 11, -1):
        with pytest.raises(
            CannotFork, match=r"is not in session 'order-1001' \(its events are 1..10\)"
        ) as bad:
            await log.fork(KEY, at, FORK.id)
        assert bad.value.why == "seq"
    for unknown in (
        replace(KEY, id="nope"),
        replace(KEY, tenant="globex"),
        replace(KEY, agent="x"),
    ):
        with pytest.raises(UnknownSession):
            await log.fork(unknown, 1, FORK.id)
    with pytest.raises(CannotFork, match="session id 'order-1001' is in use") as used:
        await log.fork(KEY, 3, KEY.id)
    assert used.value.why == "exists"
    await log.fork(KEY, 2, FORK.id)
    with pytest.raises(CannotFork, match="session id 'what-if' is in use"):
        await log.fork(KEY, 10, FORK.id)  # nothing of the second copy is kept
    assert [s.seq for s in await log.read(FORK)] == [1, 2]
    assert await everything(log, KEY) == before
    with pytest.raises(UnknownSession):
        await log.session(replace(FORK, tenant="globex"))
    assert [r.key.id for r in (await log.sessions("acme")).items] == ["what-if", "order-1001"]


async def test_a_fork_that_fails_midway_leaves_no_part_of_a_session(
    make_log: MakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy is one transaction: a failure after the row and the events were written, before
    the pending rows, undoes all of it (as a crash there would)."""
    from loopwright.store import forking

    log = await make_log()
    await source(log)
    before = await everything(log, KEY)
    rows = forking.copy_rows

    def failing(*args: Any) -> Any:
        made = rows(*args)
        yield made[0]  # the first pending row written, then the disk is gone
        raise OSError("disk gone")

    monkeypatch.setattr(forking, "copy_rows", failing)
    with pytest.raises(OSError, match="disk gone"):
        await log.fork(KEY, 10, FORK.id)
    with pytest.raises(UnknownSession):
        await log.session(FORK)
    assert [r.key.id for r in (await log.sessions("acme")).items] == [KEY.id]
    assert len((await log.pending("acme", status=None)).items) == 2  # the source's only
    assert await everything(log, KEY) == before
    monkeypatch.setattr(forking, "copy_rows", rows)
    assert await log.fork(KEY, 10, FORK.id) == FORK  # the id was never taken
    assert len(await log.read(FORK)) == 10


async def test_a_fork_notifies_its_open_items_not_those_its_copy_shows_decided(
    make_log: MakeLog,
) -> None:
    from loopwright.store.outbox import outbox_of

    now = 1_000_000.0
    log = await make_log(clock=Clock(now))
    await source(log)
    outbox = outbox_of(log)
    both = ("pending", "resolved")
    assert await outbox.expand("hook", both, now, max_age=3600) == 3  # p-1, p-2; p-1 decided
    await log.fork(KEY, 10, FORK.id)
    assert await outbox.expand("hook", both, now, max_age=3600) == 1
    new = {p.call_id: p.id for p in (await log.pending("acme", session=FORK, status=None)).items}
    [open_one] = (await outbox.deliveries(item=new["c2"])).items
    assert (open_one.notice.event, open_one.notice.tenant) == ("pending", "acme")
    assert (await outbox.deliveries(item=new["c1"])).items == []
