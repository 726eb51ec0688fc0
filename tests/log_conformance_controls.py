"""The event-log seam's conformance suite, part three: controls (a cancel, a steer, a follow-up)
sent to the run that holds a session, from another instance — another process in effect.

A control is addressed to the lease that holds the session when it is sent (its epoch), taken
once by that run in the order sent, and never by a run that comes later: the sender learns
which (`delivered`). Imported by each backend's test module, like parts one and two.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from log_conformance import KEY, Clock, MakeLog, safely, said
from loopwright import redact
from loopwright.errors import UnknownSession
from loopwright.store import StaleWriter
from loopwright.store.log import Controls, Lease, QueuedControl, SessionKey


async def next_control(log: Controls, lease: Lease) -> Any:
    """The first control the run of `lease` takes (its iteration closed after)."""
    taking = log.controls(lease)
    try:
        return await safely(anext(taking))
    finally:
        await taking.aclose()  # type: ignore[attr-defined]


async def test_controls_reach_the_run_holding_the_session_once_in_order(
    make_log: MakeLog,
) -> None:
    here, there = await make_log(), await make_log()  # the run's process, and another
    lease = (await here.claim(KEY, "run-1", ttl=30)).lease
    await here.append(lease, [said("hi")])
    sent = [
        await there.send_control(KEY, "cancel"),
        await there.send_control(KEY, "steer", "mind the budget"),
        await there.send_control(KEY, "follow_up", "and say goodbye"),
    ]
    assert [(c.key, c.epoch, c.kind, c.text) for c in sent if c is not None] == [
        (KEY, 1, "cancel", None),
        (KEY, 1, "steer", "mind the budget"),
        (KEY, 1, "follow_up", "and say goodbye"),
    ]
    taking = here.controls(lease)
    taken = [await safely(anext(taking)) for _ in sent]
    assert taken == sent
    assert [await safely(there.delivered(c)) for c in taken] == [True, True, True]
    assert [await there.withdraw(c) for c in taken] == [False, False, False]  # single-use
    later = await there.send_control(KEY, "steer", "one more")  # wakes the waiting listener
    assert await safely(anext(taking)) == later
    await taking.aclose()  # type: ignore[attr-defined]
    assert [s.event for s in await here.read(KEY)] == [said("hi")]  # controls are not events


async def test_without_a_run_holding_the_session_nothing_is_sent(make_log: MakeLog) -> None:
    clock = Clock()
    log = await make_log(clock=clock)
    with pytest.raises(UnknownSession):
        await log.send_control(KEY, "cancel")
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.release(lease, "idle")
    assert await log.send_control(KEY, "steer", "anyone?") is None  # released
    await log.claim(KEY, "run-2", ttl=30)
    clock.advance(31)
    assert await log.send_control(KEY, "cancel") is None  # its lease expired
    with pytest.raises(UnknownSession):  # another tenant's id is an unknown one
        await log.send_control(SessionKey("globex", KEY.agent, KEY.id), "cancel")


async def test_a_control_never_reaches_a_later_run(make_log: MakeLog) -> None:
    here, there = await make_log(), await make_log()
    first = (await here.claim(KEY, "run-1", ttl=30)).lease
    early = await there.send_control(KEY, "steer", "for the first run")
    assert early is not None
    await here.release(first, "idle")  # it ended before it took the control
    assert await safely(there.delivered(early)) is False  # withdrawn, and says so
    assert await there.withdraw(early) is True
    second = (await here.claim(KEY, "run-2", ttl=30)).lease
    mine = await there.send_control(KEY, "steer", "for the second run")
    assert mine is not None and mine.epoch == second.epoch == first.epoch + 1
    assert await next_control(here, second) == mine  # not the first run's


async def test_a_control_withdrawn_is_never_taken(make_log: MakeLog) -> None:
    here, there = await make_log(), await make_log()
    lease = (await here.claim(KEY, "run-1", ttl=30)).lease
    dropped = await there.send_control(KEY, "cancel")
    kept = await there.send_control(KEY, "steer", "this one")
    assert dropped is not None and kept is not None
    assert await there.withdraw(dropped) is True
    assert await safely(there.delivered(dropped)) is False
    assert await next_control(here, lease) == kept


async def test_delivered_waits_for_the_run_to_take_it(make_log: MakeLog) -> None:
    here, there = await make_log(), await make_log()
    lease = (await here.claim(KEY, "run-1", ttl=30)).lease
    sent = await there.send_control(KEY, "cancel")
    assert sent is not None
    waiting = there.delivered(sent)
    assert await next_control(here, lease) == sent
    assert await safely(waiting) is True


async def test_a_lease_taken_over_takes_no_control(make_log: MakeLog) -> None:
    clock = Clock()
    here, there = await make_log(clock=clock), await make_log(clock=clock)
    old = (await here.claim(KEY, "run-1", ttl=30)).lease
    sent = await there.send_control(KEY, "cancel")
    assert sent is not None
    clock.advance(31)  # expired: the old run can no longer be reached
    assert await safely(there.delivered(sent)) is False
    new = (await there.claim(KEY, "run-2", ttl=30)).lease
    with pytest.raises(StaleWriter):
        await next_control(here, old)
    again = await here.send_control(KEY, "cancel")
    assert again == QueuedControl(again.id if again else 0, KEY, new.epoch, "cancel")


async def test_a_release_here_ends_a_waiting_listener(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    taking = log.controls(lease)
    waiting = anext(taking)
    sent = await log.send_control(KEY, "steer", "first")
    assert await safely(waiting) == sent
    ending = asyncio.ensure_future(anext(taking))  # waits for the next control
    await log.release(lease, "idle")
    with pytest.raises(StaleWriter):
        await safely(ending)


async def test_a_steer_is_stored_redacted(make_log: MakeLog) -> None:
    """A control's text is kept as the log keeps events: without the secrets in use."""
    secret = "s3cr3t-token-4c9f2b1e7d"
    redact.register(secret)
    try:
        here, there = await make_log(), await make_log()
        lease = (await here.claim(KEY, "run-1", ttl=30)).lease
        sent = await there.send_control(KEY, "steer", f"use {secret} now")
        assert sent is not None and sent.text == "use [redacted] now"
        assert await next_control(here, lease) == sent
    finally:
        redact.forget(secret)
