"""Lifecycle notifications from a runtime on a real SQLite log: a session created, its status
changing (running, waiting on a decision, paused, idle), disposed; exact sequences per
subscriber, never in a session's log, the stored status agreeing with the last one published."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from loopwright import Approval
from loopwright.runtime import lifecycle as lifecycle_module
from loopwright.runtime import service
from loopwright.runtime.forking import fork
from loopwright.runtime.lifecycle import Subscription
from loopwright.state.lifecycle import (
    ForkSource,
    SessionCreated,
    SessionDisposed,
    SessionStatusChanged,
)
from loopwright.store.log import SessionKey
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import KEY, ended, logged, payer, pays


def created(key: SessionKey = KEY, **kw: Any) -> SessionCreated:
    return SessionCreated(tenant=key.tenant, agent=key.agent, session_id=key.id, **kw)


def status(new: Any, previous: Any = None, key: SessionKey = KEY) -> SessionStatusChanged:
    names = {"tenant": key.tenant, "agent": key.agent, "session_id": key.id}
    return SessionStatusChanged(**names, status=new, previous=previous)


def disposed(reason: Any, key: SessionKey = KEY) -> SessionDisposed:
    return SessionDisposed(tenant=key.tenant, agent=key.agent, session_id=key.id, reason=reason)


async def taken(subscription: Subscription) -> list[Any]:
    """What the subscription holds now (it is ended: the iteration stops after them)."""
    subscription.close()
    return [event async for event in subscription]


async def test_a_run_that_completes_creates_the_session_runs_it_and_leaves_it_idle(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer("hello")}, log)
    everyone, mine = runtime.lifecycle(), runtime.lifecycle(key=KEY)
    await ended(await runtime.send("acme", "payer", "s1", "hi"))
    expected = [created(), status("running"), status("idle", "running")]
    assert await taken(everyone) == expected
    assert await taken(mine) == expected
    assert (await runtime.session(KEY)).status == "idle"
    assert "session:created" not in await logged(log, KEY)  # (never in the log)
    again = runtime.lifecycle("acme")
    await ended(await runtime.send("acme", "payer", "s1", "again"))  # not created twice
    assert await taken(again) == [status("running", "idle"), status("idle", "running")]


async def test_a_run_pauses_on_an_approval_and_resumes(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer(*pays(1))}, log)
    seen = runtime.lifecycle("acme")
    assert (await ended(await runtime.send("acme", "payer", "s1", "go"))).stop_reason == "paused"
    assert (await runtime.session(KEY)).status == "paused"  # what the last status said
    [item] = await runtime.pending("acme")
    resolved = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.run is not None
    await ended(resolved.run)
    assert await taken(seen) == [
        created(),
        status("running"),
        status("paused", "running"),
        status("running", "paused"),
        status("idle", "running"),
    ]
    assert (await runtime.session(KEY)).status == "idle"


async def test_a_held_run_is_waiting_while_it_waits_on_a_decision(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer(*pays(1))}, log)
    seen = runtime.lifecycle("acme")
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    first = [await anext(seen) for _ in range(3)]
    assert first == [created(), status("running"), status("waiting", "running")]
    [item] = await runtime.pending("acme")
    await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert [pair async for pair in stream][-1][1].type == "done"
    assert await taken(seen) == [status("running", "waiting"), status("idle", "running")]


async def test_a_fork_is_created_with_its_source(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer("hello", "again")}, log)
    await ended(await runtime.send("acme", "payer", "s1", "hi"))
    seen = runtime.lifecycle("acme")
    copy = await fork(runtime, KEY, new_id="s2")
    last = (await runtime.session(KEY)).last_seq
    await ended(await runtime.send("acme", "payer", "s2", "what if"))
    assert await taken(seen) == [
        created(copy, forked_from=ForkSource(session_id="s1", seq=last)),
        status("running", key=copy),
        status("idle", "running", key=copy),
    ]


async def test_closing_the_runtime_disposes_of_what_it_holds_and_ends_subscriptions(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer("one", "two")}, log)
    other = SessionKey("acme", "payer", "s2")
    await ended(await runtime.send("acme", "payer", "s1", "hi"))
    await ended(await runtime.send("acme", "payer", "s2", "hi"))
    seen = runtime.lifecycle("acme")
    await runtime.close()
    assert [event async for event in seen] == [disposed("closed"), disposed("closed", other)]
    assert [event async for event in runtime.lifecycle()] == []  # (closed: ends at once)


async def test_a_session_evicted_from_the_cache_is_disposed(logs, runtimes, monkeypatch):
    monkeypatch.setattr(service, "KEPT_SESSIONS", 1)
    log = await logs()
    runtime = runtimes({"payer": payer("one", "two")}, log)
    other = SessionKey("acme", "payer", "s2")
    await ended(await runtime.send("acme", "payer", "s1", "hi"))
    seen = runtime.lifecycle()
    await ended(await runtime.send("acme", "payer", "s2", "hi"))
    assert await taken(seen) == [
        created(other),
        status("running", key=other),
        status("idle", "running", key=other),
        disposed("evicted"),
    ]


async def test_a_tenant_sees_only_its_sessions(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer("one", "two")}, log)
    acme, globex, one = (
        runtime.lifecycle("acme"),
        runtime.lifecycle("globex"),
        runtime.lifecycle(key=SessionKey("globex", "payer", "g2")),
    )
    await ended(await runtime.send("acme", "payer", "s1", "hi"))
    await ended(await runtime.send("globex", "payer", "g1", "hi"))
    g1 = SessionKey("globex", "payer", "g1")
    assert await taken(acme) == [created(), status("running"), status("idle", "running")]
    assert await taken(globex) == [
        created(g1),
        status("running", key=g1),
        status("idle", "running", key=g1),
    ]
    assert await taken(one) == []


async def test_a_slow_subscriber_loses_notifications_logged_and_never_blocks_a_run(
    logs, runtimes, monkeypatch, caplog
):
    monkeypatch.setattr(lifecycle_module, "QUEUE_SIZE", 2)
    log = await logs()
    runtime = runtimes({"payer": payer("hello")}, log)
    slow, fast = runtime.lifecycle(), runtime.lifecycle()
    with caplog.at_level(logging.WARNING, "loopwright.runtime"):
        await ended(await runtime.send("acme", "payer", "s1", "hi"))
    assert await taken(slow) == [created(), status("running")]
    assert slow.dropped == 1
    message = "lifecycle subscriber fell behind: dropped session:status of session s1 (1 dropped)"
    assert [r.getMessage() for r in caplog.records] == [message, message]  # one per subscriber
    assert (await taken(fast), fast.dropped) == ([created(), status("running")], 1)


@pytest.mark.parametrize("profile", ["full", "v1"])
def test_the_wire_carries_them_on_the_full_profile_only(profile):
    from loopwright import wire

    event = created(forked_from=ForkSource(session_id="s0", seq=4))
    expected = {
        "full": '{"tenant":"acme","agent":"payer","sessionId":"s1",'
        '"forkedFrom":{"sessionId":"s0","seq":4},"type":"session:created"}',
        "v1": None,
    }
    assert wire.dumps(event, profile) == expected[profile]
