"""The event-log seam's conformance suite, part two: decisions (single-use, a denial's batch,
under a lease), the rows derived from the events, and following a session or an item from
another instance (another process). Same `make_log` fixture as part one (`log_conformance.py`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from log_conformance import KEY, SAFETY, Clock, MakeLog, approval, decide, reply, safely, said
from loopwright import events as ev
from loopwright.errors import UnknownSession
from loopwright.messages import Usage
from loopwright.store import PendingRecord, StoredEvent
from loopwright.store.log import EventLog, SessionKey, Verdict


def question(pending_id: str, text: str) -> ev.QuestionPending:
    return ev.QuestionPending(
        id=pending_id, question=text, agent="support", requested_at="2026-01-01T00:00:01.000Z"
    )


def decided_events(stored: list[StoredEvent]) -> list[tuple[str, str, str]]:
    return [
        (s.event.id, s.event.status, s.event.by)
        for s in stored
        if isinstance(s.event, ev.PendingDecided)
    ]


async def paused_batch(log: EventLog, ids: list[str]) -> int:
    """A session whose last reply (seq 2) asked for `ids`, left paused; returns that reply's seq."""
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    events: list[ev.Event] = [said("refund both"), reply("on it")]
    for n, pending_id in enumerate(ids):
        events += [approval(pending_id, n=n), ev.PendingRequested(id=pending_id, call_id=f"c{n}")]
    await log.append(lease, [*events, ev.LoopPaused(pending_ids=ids)])
    await log.append(lease, [ev.Done(text="", stop_reason="paused")])
    await log.release(lease, "paused")
    return 2


async def test_a_decision_is_single_use_under_concurrency(make_log: MakeLog) -> None:
    one, two = await make_log(), await make_log()
    await paused_batch(one, ["p-1"])
    attempts = [
        (log, Verdict("approved" if n % 2 else "denied", f"human-{n}", note=f"n{n}"))
        for n in range(12)
        for log in (one, two)
    ]
    results = await safely(asyncio.gather(*(log.decide("acme", "p-1", d) for log, d in attempts)))
    winners = [r for r in results if r.changed]
    assert len(winners) == 1
    item = winners[0].item
    assert item.status in ("approved", "denied") and item.decided_by is not None
    assert all(r.item == item and r.outstanding == 0 for r in results)
    stored = await one.read(KEY)
    assert decided_events(stored) == [("p-1", item.status, item.decided_by)]
    assert [s.seq for s in stored] == list(range(1, len(stored) + 1))


async def test_seqs_stay_gapless_while_decisions_race_the_run(make_log: MakeLog) -> None:
    runner, approver = await make_log(), await make_log()
    ids = [f"p-{n}" for n in range(8)]
    lease = (await runner.claim(KEY, "run-1", ttl=30)).lease
    await runner.append(lease, [said("go"), reply(), *[approval(i) for i in ids]])
    steps = [[said(f"step {n}"), reply(f"r{n}")] for n in range(8)]

    async def run() -> None:
        for step in steps:
            await runner.append(lease, step)

    decisions = [approver.decide("acme", i, Verdict("approved", "ann")) for i in ids]
    await safely(asyncio.gather(run(), *decisions))
    stored = await runner.read(KEY)
    assert [s.seq for s in stored] == list(range(1, 2 + len(ids) + 2 * len(steps) + len(ids) + 1))
    assert [s.event for s in stored if s.event.type == "input:received"][1:] == [
        step[0] for step in steps
    ]
    assert sorted(decided_events(stored)) == [(i, "approved", "ann") for i in ids]
    assert (await runner.session(KEY)).last_seq == len(stored)


async def test_a_decision_records_what_was_decided(make_log: MakeLog) -> None:
    clock = Clock(1_767_225_600.0)  # 2026-01-01T00:00:00Z
    log = await make_log(clock=clock)
    await paused_batch(log, ["p-1", "p-2"])
    first = await decide(log, "p-1", "approved", edited_args={"n": 5}, note="fine")
    assert (first.changed, first.outstanding) == (True, 1)
    assert first.item.status == "approved" and first.item.edited_args == {"n": 5}
    assert (first.item.decided_by, first.item.decided_at, first.item.note) == (
        "ann",
        "2026-01-01T00:00:00.000Z",
        "fine",
    )
    last = (await log.read(KEY))[-1]
    assert last.event == ev.PendingDecided(
        id="p-1",
        status="approved",
        by="ann",
        decided_at="2026-01-01T00:00:00.000Z",
        args={"n": 5},
        reason="fine",
    )
    again = await decide(log, "p-1", "denied", by="bob")
    assert (again.changed, again.item, again.outstanding) == (False, first.item, 1)
    assert (await log.read(KEY))[-1] == last  # nothing appended
    assert (await log.session(KEY)).status == "paused"  # a decision is not a run


async def test_a_denial_skips_the_rest_of_its_batch(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("x"), reply(), approval("early")])  # an earlier batch (seq 2)
    await log.append(lease, [reply(), approval("p-1"), approval("p-2"), approval("p-3")])
    approved = await decide(log, "p-3", "approved")
    assert approved.outstanding == 2
    denied = await decide(log, "p-2", "denied", by="bob", note="too much")
    assert (denied.changed, denied.outstanding, denied.item.status) == (True, 0, "denied")
    assert decided_events((await log.read(KEY))[-3:]) == [
        ("p-3", "approved", "ann"),
        ("p-2", "denied", "bob"),
        ("p-1", "skipped", "closed by p-2"),
    ]
    statuses = {p.id: p.status for p in (await log.pending("acme", status=None)).items}
    assert statuses == {"early": "open", "p-1": "skipped", "p-2": "denied", "p-3": "approved"}
    skipped = await log.pending_item("acme", "p-1")
    assert (skipped.decided_by, skipped.batch_seq) == ("closed by p-2", 4)
    await log.append(lease, [said("after")])  # the run's lease was never disturbed


async def test_decide_appends_to_a_session_whose_lease_is_held(make_log: MakeLog) -> None:
    runner, approver = await make_log(), await make_log()
    lease = (await runner.claim(KEY, "run-1", ttl=30)).lease
    await runner.append(lease, [said("x"), reply(), approval("p-1")])
    waiting = asyncio.ensure_future(runner.wait_decided("acme", "p-1"))
    result = await approver.decide("acme", "p-1", Verdict("approved", "ann"))
    assert result.changed and result.item.status == "approved"
    assert (await safely(waiting)) == result.item
    assert (
        await runner.append(
            lease, [ev.ToolStarted(id="c0", tool="refund", args={}, detail_text="")]
        )
        == 5
    )
    stored = await approver.read(KEY)
    assert [s.event.type for s in stored] == [
        "input:received",
        "message:completed",
        "approval:pending",
        "pending:decided",
        "tool:started",
    ]
    assert (await approver.session(KEY)).status == "running"


async def test_derived_rows_are_what_the_events_say(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    other = SessionKey("acme", "billing", "order-7")
    other_lease = (await log.claim(other, "run-2", ttl=30)).lease
    cheap, dear = (
        Usage(input_tokens=10, output_tokens=2, cost=0.01),
        Usage(input_tokens=7, output_tokens=3, cache_read_tokens=100, cache_write_tokens=5),
    )
    await log.append(lease, [said("go"), reply("a", cheap), approval("p-1", amount=5)])
    await log.append(lease, [ev.PendingRequested(id="p-1", call_id="call-1")])  # a later batch
    await log.append(lease, [reply("b"), question("q-1", "which?")])
    await log.append(
        lease, [ev.PendingRequested(id="q-1", call_id="call-2", kind="question"), reply("c", dear)]
    )
    await log.append(  # a running call's own question names its tool (another session's id: none)
        lease,
        [
            question("q-2", "which floor?"),
            ev.PendingRequested(id="q-2", call_id="call-3", kind="question"),
            ev.ToolSuspended(
                id="call-3", tool="book_room", session_id=KEY.id, pending_ids=["q-2", "p-2"]
            ),
        ],
    )
    await log.append(other_lease, [reply("d", cheap), approval("p-2")])
    await decide(log, "q-1", "answered", by="cli", answer="the blue one")
    await decide(log, "p-2", "denied", by="bob")

    for key in (KEY, other):
        expected = derive_by_hand(await log.read(key), key)
        page = await log.pending("acme", session=key, status=None)
        assert page.items == expected
    assert (await log.pending_item("acme", "p-1")).call_id == "call-1"
    q2 = await log.pending_item("acme", "q-2")
    assert (q2.kind, q2.tool, q2.call_id) == ("question", "book_room", "call-3")
    assert (await log.pending_item("acme", "p-2")).call_id == ""
    assert (await log.pending_item("acme", "q-1")).args == {"question": "which?", "options": None}
    assert await log.usage("acme", key=KEY) == {
        "requests": 2,
        "input_tokens": 17,
        "output_tokens": 5,
        "cache_read_tokens": 100,
        "cache_write_tokens": 5,
        "cost": 0.01,
    }
    assert await log.usage("acme") == {
        "requests": 3,
        "input_tokens": 27,
        "output_tokens": 7,
        "cache_read_tokens": 100,
        "cache_write_tokens": 5,
        "cost": 0.02,
    }
    assert (await log.usage("globex"))["requests"] == 0


def derive_by_hand(stored: list[StoredEvent], key: SessionKey) -> list[PendingRecord]:
    """The pending items a log describes, worked out here independently of `store.derive`."""
    items: dict[str, dict[str, Any]] = {}
    batch = 0
    for s in stored:
        e = s.event
        if isinstance(e, ev.MessageCompleted):
            batch = s.seq
        elif isinstance(e, ev.ApprovalPending | ev.QuestionPending):
            is_approval = isinstance(e, ev.ApprovalPending)
            items[e.id] = {
                "id": e.id,
                "session_id": key.id,
                "tenant": key.tenant,
                "agent": key.agent,
                "kind": "approval" if is_approval else "question",
                "call_id": "",
                "tool": e.tool if isinstance(e, ev.ApprovalPending) else "ask_user",
                "args": e.args
                if isinstance(e, ev.ApprovalPending)
                else {"question": e.question, "options": e.options},
                "reason": e.reason if isinstance(e, ev.ApprovalPending) else e.question,
                "requested_at": e.requested_at,
                "batch_seq": batch,
            }
        elif isinstance(e, ev.PendingRequested):
            items[e.id]["call_id"] = e.call_id
        elif isinstance(e, ev.ToolSuspended):
            for pending_id in (i for i in e.pending_ids if i in items):
                items[pending_id].update(call_id=e.id, tool=e.tool)
        elif isinstance(e, ev.PendingDecided) and "status" not in items[e.id]:
            items[e.id].update(
                status=e.status,
                decided_by=e.by,
                decided_at=e.decided_at,
                edited_args=e.args,
                answer=e.answer,
                note=e.reason,
            )
    return [PendingRecord(**item) for item in items.values()]


async def test_follow_sees_another_instances_commits_in_order(make_log: MakeLog) -> None:
    writer, reader = await make_log(), await make_log()
    lease = (await writer.claim(KEY, "run-1", ttl=30)).lease
    batches = [[said(f"{n}-{i}") for i in range(n % 3 + 1)] for n in range(8)]
    following = reader.follow(KEY, after=0)
    seen: list[StoredEvent] = []
    async with asyncio.timeout(SAFETY):
        for batch in batches:
            coming = asyncio.ensure_future(anext(following))  # asked for before it is written
            last = await writer.append(lease, batch)
            seen.append(await coming)
            while seen[-1].seq < last:
                seen.append(await anext(following))
    await following.aclose()
    assert [s.seq for s in seen] == list(range(1, sum(map(len, batches)) + 1))
    assert [s.event for s in seen] == [e for batch in batches for e in batch]


async def test_follow_starts_after_a_seq_and_is_woken_by_its_own_instance(
    make_log: MakeLog,
) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said(str(n)) for n in range(4)])
    following = log.follow(KEY, after=2)
    async with asyncio.timeout(SAFETY):
        assert [(await anext(following)).seq for _ in range(2)] == [3, 4]
        coming = asyncio.ensure_future(anext(following))
        await log.append(lease, [said("5")])
        assert (await coming).event == said("5")
    await following.aclose()
    unknown = log.follow(SessionKey("acme", "support", "nope"), after=0)
    with pytest.raises(UnknownSession):
        await safely(anext(unknown))


async def test_wait_decided_is_woken_by_another_instance(make_log: MakeLog) -> None:
    waiter, approver = await make_log(), await make_log()
    await paused_batch(waiter, ["p-1", "p-2"])
    waiting = asyncio.ensure_future(waiter.wait_decided("acme", "p-2"))
    first = await approver.decide("acme", "p-1", Verdict("approved", "ann"))
    assert not waiting.done() and first.outstanding == 1  # not the item it waits on
    decided = await approver.decide("acme", "p-2", Verdict("denied", "bob", note="no"))
    assert await safely(waiting) == decided.item
    assert await safely(approver.wait_decided("acme", "p-1")) == first.item  # at once
