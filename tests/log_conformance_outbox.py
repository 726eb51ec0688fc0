"""The event-log conformance suite, part four: the notifications' outbox (`store.outbox`).

A notice is written with the pending item, and with its decision, in the same transaction; a
delivery is made once per (notice, target); claims hold; every attempt is recorded. Run on
both backends by `test_log_conformance.py`, beside the other parts (the `make_log` fixture).
"""

from __future__ import annotations

import pytest

from log_conformance import KEY, Clock, MakeLog, approval, decide, reply, said
from loopwright.store.log import Page
from loopwright.store.outbox import Attempt, AttemptOutcome, outbox_of
from loopwright.store.sqlite_rows import iso

NOW = 1_000_000.0
BOTH = ("pending", "resolved")


async def _paused(make_log: MakeLog, clock: Clock, *ids: str) -> object:
    log = await make_log(clock=clock)
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("refund"), reply(), *(approval(i, amount=5) for i in ids)])
    return log


async def test_a_pending_item_and_its_decision_are_delivered_once_per_target(
    make_log: MakeLog,
) -> None:
    clock = Clock(NOW)
    log = await _paused(make_log, clock, "p-1")
    outbox = outbox_of(log)
    assert await outbox.expand("hook-a", BOTH, NOW, max_age=3600) == 1
    assert await outbox.expand("hook-a", BOTH, NOW, max_age=3600) == 0  # made once
    assert await outbox.expand("hook-b", ("resolved",), NOW, max_age=3600) == 0  # skipped
    claimed = await outbox.claim(["hook-a", "hook-b"], NOW, hold=30, owner="w1")
    assert [(d.target, d.notice.item, d.notice.event, d.notice.tenant) for d in claimed] == [
        ("hook-a", "p-1", "pending", "acme")
    ]
    assert await outbox.claim(["hook-a"], NOW + 29, hold=30, owner="w2") == []  # held
    await outbox.record(claimed[0], AttemptOutcome("delivered", "t1", status=204))
    await decide(log, "p-1", "approved")
    await decide(log, "p-1", "denied")  # the first decision won: no second notice
    assert await outbox.expand("hook-a", BOTH, NOW, max_age=3600) == 1
    assert await outbox.expand("hook-b", ("resolved",), NOW, max_age=3600) == 1
    resolved = await outbox.claim(["hook-a", "hook-b"], NOW, hold=30, owner="w1")
    assert sorted((d.target, d.notice.event) for d in resolved) == [
        ("hook-a", "resolved"),
        ("hook-b", "resolved"),
    ]
    listed = (await outbox.deliveries("acme")).items
    assert [(d.target, d.notice.event, d.state, d.attempts) for d in listed] == [
        ("hook-a", "resolved", "due", 0),
        ("hook-b", "resolved", "due", 0),
        ("hook-a", "pending", "delivered", 1),
    ]
    assert listed[2].tried == [Attempt(1, "t1", 204, None)]
    assert listed[2].delivered_at == "t1"
    assert (await outbox.deliveries("globex")).items == []
    assert len((await outbox.deliveries(item="p-1")).items) == 3


async def test_a_failed_attempt_is_tried_again_when_due_and_a_lost_hold_expires(
    make_log: MakeLog,
) -> None:
    clock = Clock(NOW)
    outbox = outbox_of(await _paused(make_log, clock, "p-1"))
    await outbox.expand("hook", BOTH, NOW, max_age=3600)
    [first] = await outbox.claim(["hook"], NOW, hold=30, owner="w1")
    await outbox.record(first, AttemptOutcome("due", "t1", status=503, due=NOW + 10))
    assert await outbox.next_due(["hook"]) == NOW + 10
    assert await outbox.claim(["hook"], NOW + 9, hold=30, owner="w1") == []
    [again] = await outbox.claim(["hook"], NOW + 10, hold=30, owner="w1")
    assert again.id == first.id and again.attempts == 1
    # w1 dies holding it: once the hold expires, another worker posts it again
    assert await outbox.claim(["hook"], NOW + 39, hold=30, owner="w2") == []
    assert await outbox.next_due(["hook"]) == NOW + 40
    [taken] = await outbox.claim(["hook"], NOW + 40, hold=30, owner="w2")
    await outbox.record(taken, AttemptOutcome("failed", "t3", error="connection refused"))
    [listed] = (await outbox.deliveries()).items
    assert (listed.state, listed.attempts, listed.last_error) == ("failed", 2, "connection refused")
    assert listed.tried == [
        Attempt(1, "t1", 503, None),
        Attempt(2, "t3", None, "connection refused"),
    ]
    assert await outbox.next_due(["hook"]) is None


async def test_a_denial_notifies_the_items_it_closes_and_old_notices_are_skipped(
    make_log: MakeLog,
) -> None:
    clock = Clock(NOW)
    log = await _paused(make_log, clock, "p-1", "p-2")
    await decide(log, "p-1", "denied")
    outbox = outbox_of(log)
    # a target configured a day later: what is older than max_age is not sent to it
    assert await outbox.expand("late", BOTH, NOW + 86_400, max_age=3600) == 0
    assert await outbox.expand("hook", BOTH, NOW, max_age=3600) == 4
    claimed = await outbox.claim(["hook"], NOW, hold=30, owner="w1")
    assert [(d.notice.item, d.notice.event) for d in claimed] == [
        ("p-1", "pending"),
        ("p-2", "pending"),
        ("p-1", "resolved"),
        ("p-2", "resolved"),
    ]
    assert (await outbox.deliveries("acme", item="p-2")).items != []
    assert [d.target for d in (await outbox.deliveries()).items] == [
        "hook"
    ] * 4  # (skipped: unlisted)


async def test_every_process_gets_the_same_key(make_log: MakeLog) -> None:
    one, two = outbox_of(await make_log()), outbox_of(await make_log())
    assert await one.key("links", "first") == "first"
    assert await two.key("links", "second") == "first"
    assert await two.key("other", "second") == "second"


async def test_what_is_done_with_is_pruned_and_what_is_due_is_kept(make_log: MakeLog) -> None:
    clock = Clock(NOW)
    log = await _paused(make_log, clock, "p-1", "p-2")
    outbox = outbox_of(log)
    await outbox.expand("hook", BOTH, NOW, max_age=3600)
    first, second = await outbox.claim(["hook"], NOW, hold=30, owner="w1")
    await outbox.record(first, AttemptOutcome("delivered", "t1", status=200))
    await outbox.record(second, AttemptOutcome("due", "t1", status=503, due=NOW + 10))
    assert await outbox.prune(iso(NOW)) == 0  # nothing made before then
    assert await outbox.prune(iso(NOW + 1)) == 1
    [left] = (await outbox.deliveries()).items
    assert (left.id, left.notice.item, left.tried) == (
        second.id,
        "p-2",
        [Attempt(1, "t1", 503, None)],
    )
    assert (await outbox.notices())[0] == 1  # p-1's notice went, p-2's is still due
    [again] = await outbox.claim(["hook"], NOW + 10, hold=30, owner="w1")
    assert again.id == second.id


async def test_a_long_outbox_is_fanned_out_in_one_expand(
    make_log: MakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopwright.store import sql_outbox

    monkeypatch.setattr(sql_outbox, "EXPAND_BATCH", 2)  # five notices: three batches
    outbox = outbox_of(await _paused(make_log, Clock(NOW), *(f"p-{n}" for n in range(5))))
    assert await outbox.expand("hook", BOTH, NOW, max_age=3600) == 5
    claimed = await outbox.claim(["hook"], NOW, hold=30, owner="w1")
    assert [d.notice.item for d in claimed] == [f"p-{n}" for n in range(5)]


async def test_deliveries_are_listed_a_page_at_a_time_by_notice_then_target(
    make_log: MakeLog,
) -> None:
    """Newest notice first, then by target in byte order on both backends ('Z' < 'a'); the
    cursor is the last delivery's `<notice>:<target>` (a target may hold ':'); a notice made
    between two pages does not move the next one; skipped deliveries are not listed."""
    clock = Clock(NOW)
    log = await _paused(make_log, clock, "p-0", "p-1", "p-2")
    outbox = outbox_of(log)
    url = "https://hooks.test:8443/in"
    for target in ("alpha", url, "Zed"):
        assert await outbox.expand(target, BOTH, NOW, max_age=3600) == 3
    assert await outbox.expand("late", ("resolved",), NOW, max_age=3600) == 0  # 3 skipped
    for claimed in await outbox.claim(["alpha", url, "Zed"], NOW, hold=30, owner="w1"):
        if claimed.notice.item == "p-0":
            await outbox.record(claimed, AttemptOutcome("delivered", "t1", status=200))
    everything = (await outbox.deliveries("acme", limit=1000)).items
    assert [(d.notice.id, d.target) for d in everything] == [
        (n, target) for n in (3, 2, 1) for target in ("Zed", "alpha", url)
    ]

    first = await outbox.deliveries("acme", limit=4)
    assert [d.id for d in first.items] == [d.id for d in everything[:4]]
    assert first.cursor == "2:Zed"
    await decide(log, "p-0", "approved")  # notice 4, fanned out before the next page is read
    assert await outbox.expand("Zed", BOTH, NOW, max_age=3600) == 1
    second = await outbox.deliveries("acme", limit=4, cursor=first.cursor)
    assert [d.id for d in second.items] == [d.id for d in everything[4:8]]
    assert second.cursor == "1:alpha"
    last = await outbox.deliveries("acme", limit=4, cursor=second.cursor)
    assert [d.id for d in last.items] == [everything[8].id]
    assert last.cursor is None
    assert [(d.target, d.tried) for d in [*second.items, *last.items] if d.notice.id == 1] == [
        ("Zed", [Attempt(1, "t1", 200, None)]),
        ("alpha", [Attempt(1, "t1", 200, None)]),
        (url, [Attempt(1, "t1", 200, None)]),
    ]
    assert [(d.notice.id, d.target) for d in (await outbox.deliveries(limit=2)).items] == [
        (4, "Zed"),
        (3, "Zed"),
    ]

    one = await outbox.deliveries(item="p-1", limit=2)
    assert ([(d.notice.item, d.target) for d in one.items], one.cursor) == (
        [("p-1", "Zed"), ("p-1", "alpha")],
        "2:alpha",
    )
    rest = await outbox.deliveries(item="p-1", limit=2, cursor=one.cursor)
    assert ([(d.notice.item, d.target) for d in rest.items], rest.cursor) == ([("p-1", url)], None)
    assert await outbox.deliveries(limit=2, cursor="0:") == Page([], None)
    for bad in (":", "2", "x:Zed", "-1:Zed", "1" * 19 + ":Zed"):
        with pytest.raises(ValueError, match="cursor"):
            await outbox.deliveries(limit=2, cursor=bad)


async def test_what_stays_due_too_long_is_given_up_unless_a_worker_holds_it(
    make_log: MakeLog,
) -> None:
    clock = Clock(NOW)
    outbox = outbox_of(await _paused(make_log, clock, "p-1", "p-2", "p-3"))
    await outbox.expand("hook", BOTH, NOW, max_age=3600)
    first, second, third = await outbox.claim(["hook"], NOW, hold=30, owner="w1")
    await outbox.record(first, AttemptOutcome("delivered", "t1", status=200))
    await outbox.record(second, AttemptOutcome("due", "t1", status=503, due=NOW + 10))
    # `third` is still held by w1 until NOW + 30
    assert await outbox.expire(iso(NOW), "expired", NOW + 5) == 0  # none made before then
    assert await outbox.expire(iso(NOW + 1), "expired", NOW + 5) == 1  # second; third held
    states = {d.id: (d.state, d.last_error) for d in (await outbox.deliveries()).items}
    assert states == {
        first.id: ("delivered", None),
        second.id: ("failed", "expired"),
        third.id: ("due", None),
    }
    assert await outbox.expire(iso(NOW + 1), "expired", NOW + 30) == 1  # its hold lapsed
    assert await outbox.next_due(["hook"]) is None
    assert await outbox.claim(["hook"], NOW + 31, hold=30, owner="w2") == []
