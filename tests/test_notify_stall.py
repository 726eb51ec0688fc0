"""Notifications that cannot be stalled (docs/notify.md, "Delivery"), against real misbehaving
receivers on 127.0.0.1 (notify_misbehaving.py): a receiver that trickles its answer a byte at a
time is cut at the webhook's `timeout`, whole answer included; one that trickles forever delays
no other webhook; a huge answer is not read; a receiver that keeps failing is backed off as a
whole, and what it never took is given up after `max_age` (the outbox does not grow)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from log_conformance import Clock, approval, reply, said
from loopwright.notify import Deliverer, Links, NotifySettings, Webhook, WebhookNotifier
from loopwright.notify.webhook import ANSWER_BYTES
from loopwright.runtime import Runtime
from loopwright.store.log import SessionKey
from loopwright.store.outbox import Delivery, outbox_of
from loopwright.store.sqlite_log import SQLiteLog
from notify_misbehaving import HUGE, SAFETY, Misbehaving

SECRET = "whsec-stall-0123456789"
NOW = 1_800_000_000.0
ALL = frozenset({"approval", "question", "resolved"})


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SQLiteLog]:
    opened = SQLiteLog(tmp_path / "loopwright.db", clock=Clock(NOW))
    yield opened
    await opened.close()


async def pause(log: SQLiteLog, n: int) -> None:
    """Approval `p-<n>` pending, in a session of its own."""
    lease = (await log.claim(SessionKey("acme", "support", f"order-{n}"), "run", ttl=30)).lease
    await log.append(lease, [said("refund"), reply(), approval(f"p-{n}", amount=n)])


def worker(log: SQLiteLog, clock: Clock, *hooks: Webhook, **options: Any) -> Deliverer:
    links = Links("https://agents.example.com", "link-key-0123456789abcdef", 3600, clock)
    notifiers = [WebhookNotifier(hook) for hook in hooks]
    settings = NotifySettings(webhooks=hooks, **options)
    return Deliverer(Runtime({}, log), notifiers, settings, links, clock=clock, random=lambda: 0.5)


async def listed(log: SQLiteLog, target: str) -> list[Delivery]:
    found = (await outbox_of(log).deliveries("acme")).items
    return sorted((d for d in found if d.target == target), key=lambda d: d.notice.item)


async def test_an_answer_trickled_a_byte_at_a_time_is_cut_at_the_timeout(log: SQLiteLog) -> None:
    await pause(log, 1)
    clock = Clock(NOW)
    async with Misbehaving("trickle", every=0.02) as slow:
        deliverer = worker(log, clock, Webhook("slow", slow.url, SECRET, ALL, timeout=0.3))
        try:
            async with asyncio.timeout(SAFETY):  # (a safety net: before, it never ended)
                assert await deliverer.tick() == 1
        finally:
            await deliverer.close()
        await slow.until(lambda: slow.cut == 1)  # the client let go mid-answer
    [tried] = await listed(log, "slow")
    assert (tried.state, tried.attempts, tried.last_status, tried.last_error) == (
        "due",
        1,
        None,
        "no whole answer within the timeout (0.3 s)",
    )
    assert tried.due == NOW + 1.5  # tried again later, as any attempt without an answer
    assert [b["id"] for b in slow.bodies] == ["p-1"] and slow.sent > 0


async def test_a_receiver_trickling_forever_delays_no_other_webhook(log: SQLiteLog) -> None:
    clock = Clock(NOW)
    async with Misbehaving("trickle") as slow, Misbehaving("ok") as healthy:
        deliverer = worker(
            log,
            clock,
            Webhook("slow", slow.url, SECRET, ALL, timeout=SAFETY * 10),  # (never cut here)
            Webhook("healthy", healthy.url, SECRET, ALL),
        )
        deliverer.start()  # the server's running worker, with its own rounds
        try:
            for n in range(1, 6):  # approvals one after another, as runs pause
                await pause(log, n)
                deliverer.wake()
                await healthy.until(lambda n=n: len(healthy.bodies) == n)  # type: ignore[misc]
            await deliverer.settled("healthy")  # (its last attempt recorded)
            await slow.until(lambda: len(slow.bodies) == 4)  # (4 at once at most: `in_flight`)
            trickling = (slow.cut, slow.open, len(slow.bodies))
            delivered = await listed(log, "healthy")
            waiting = await listed(log, "slow")
        finally:
            await deliverer.close()
    assert [b["id"] for b in healthy.bodies] == ["p-1", "p-2", "p-3", "p-4", "p-5"]
    assert [(d.notice.item, d.state, d.attempts) for d in delivered] == [
        (f"p-{n}", "delivered", 1) for n in range(1, 6)
    ]
    assert trickling == (0, 4, 4)  # all four still trickling, none cut
    assert [(d.state, d.attempts) for d in waiting] == [("due", 0)] * 5


async def test_a_huge_answer_is_not_read(log: SQLiteLog) -> None:
    await pause(log, 1)
    clock = Clock(NOW)
    async with Misbehaving("huge") as huge:
        deliverer = worker(log, clock, Webhook("huge", huge.url, SECRET, ALL))
        try:
            assert await deliverer.tick() == 1
        finally:
            await deliverer.close()
        await huge.until(lambda: huge.cut == 1)  # let go of, not read to its end
    [tried] = await listed(log, "huge")
    assert (tried.state, tried.last_status) == ("delivered", 200)
    # What the client took: what it read (ANSWER_BYTES and one read of 64 KiB at most) and the
    # two sockets' buffers; the 64 MiB answer never was.
    assert ANSWER_BYTES <= huge.sent <= 8 * 1024 * 1024 < HUGE


async def test_a_receiver_that_keeps_failing_backs_off_and_is_given_up_after_max_age(
    log: SQLiteLog,
) -> None:
    for n in range(1, 4):
        await pause(log, n)
    clock = Clock(NOW)
    async with Misbehaving("silent") as dead:
        hook = Webhook("dead", dead.url, SECRET, ALL, timeout=0.2)
        deliverer = worker(log, clock, hook, max_age=600.0)
        try:
            assert await deliverer.tick() == 3  # three at once, none answered
            clock.advance(1.5)  # each delivery is due again (1.5 s)...
            assert await deliverer.tick() == 0  # ...but the target backs off: 8 s * 0.75
            clock.advance(4.5)
            assert await deliverer.tick() == 1  # one attempt at a time while it fails
            clock.advance(11.5)  # its fourth failure in a row: 16 s * 0.75
            assert await deliverer.tick() == 0
            clock.advance(0.5)
            assert await deliverer.tick() == 1
            clock.advance(3600)  # the next hourly pruning: made over max_age ago
            assert await deliverer.tick() == 0
        finally:
            await deliverer.close()
        await dead.until(lambda: dead.cut == 5)
    gone = await listed(log, "dead")
    expired = "expired: not delivered within max_age (600 s)"
    assert [(d.state, d.attempts, d.last_error) for d in gone] == [
        ("failed", 2, expired),
        ("failed", 2, expired),
        ("failed", 1, expired),
    ]
    assert [b["id"] for b in dead.bodies] == ["p-1", "p-2", "p-3", "p-1", "p-2"]


async def test_a_worker_closed_as_it_is_woken_ends(log: SQLiteLog) -> None:
    nowhere = Webhook("nowhere", "http://127.0.0.1:9/hook", SECRET, ALL)
    deliverer = worker(log, Clock(NOW), nowhere)
    deliverer.start()
    running = deliverer._task
    async with asyncio.timeout(SAFETY):  # (a safety net: before, its task never ended)
        while not deliverer._wake._waiters:  # type: ignore[attr-defined]  # (its task waits)
            await asyncio.sleep(0)
        deliverer.wake()  # (an attempt ended, or a run paused) at the moment it is closed
        await deliverer.close()
    assert running is not None and running.done()
