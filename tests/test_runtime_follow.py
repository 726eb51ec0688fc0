"""Held streams go on: a follower of a session sees a pause, the decision made anywhere, and the
resumed run up to the real `done`; a holder that goes away leaves a durable pause; every seq a
stream carries is that of a committed event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import call, scripted
from loopwright import Agent, Approval, Hooks
from loopwright import events as ev
from loopwright.runtime.follow import batches
from loopwright.store.log import SessionKey
from loopwright.testing import FunctionModel, Reply
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import (
    KEY,
    Held,
    ended,
    kinds,
    logged,
    look,
    paid,
    payer,
    pays,
    releases_held,
    until,
)

ASKED = [
    "session",
    "input:received",
    "step:started",
    "budget:check",
    "message:completed",
    "approval:pending",
    "pending:requested",
]
RAN = [
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:finished",
    "step:started",
    "budget:check",
    "message:completed",
    "step:finished",
    "loop:done",
    "done",
]


def committed_as_logged(items, stored) -> None:
    """Each seq a stream carried is the seq of that very event in the log, in order."""
    by_seq = {s.seq: s.event for s in stored}
    seqs = [seq for seq, _ in items if seq is not None]
    assert seqs == sorted(set(seqs))
    for seq, event in items:
        if seq is not None:
            assert by_seq[seq] == event


async def test_a_held_stream_goes_on_after_a_decision_made_in_another_process(logs, runtimes):
    agent = payer(*pays(1))
    log = await logs()
    here = runtimes({"payer": agent}, log)
    elsewhere = runtimes({"payer": agent}, await logs())
    live = await here.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    asked = await until(stream, "pending:requested")
    [item] = await elsewhere.pending("acme")
    decided = await elsewhere.resolve("acme", item.id, Approval.approve(by="bo"))
    assert (decided.status, decided.run) == ("resumed", None)  # the run waits on it, there
    rest = [pair async for pair in stream]
    assert kinds(asked + rest) == [
        *ASKED,
        "pending:decided",
        "approval:resolved",
        "actauth:decision",
        *RAN,
    ]
    resolution = rest[1][1]
    assert (resolution.decision, resolution.by) == ("approve", "bo")
    assert (await ended(live)).stop_reason == "completed" and paid == [1]
    committed_as_logged(asked + rest, await log.read(KEY))
    assert await logged(log, KEY) == [e.type for e in live.items if not e.type.endswith("delta")]


async def test_a_follower_of_a_paused_session_sees_it_resumed_elsewhere(logs, runtimes):
    agent = payer(*pays(2))
    log = await logs()
    here = runtimes({"payer": agent}, log)
    elsewhere = runtimes({"payer": agent}, await logs())
    paused = await ended(await here.send("acme", "payer", "s1", "go"))
    assert paused.stop_reason == "paused"
    end = (await log.session(KEY)).last_seq
    stream = here.events(KEY, after=end, follow=True)  # held across the pause
    [item] = await here.pending("acme")
    resumed = await elsewhere.resolve("acme", item.id, Approval.approve(by="bo"))
    assert resumed.run is not None  # nothing was live: it resumed there
    seen = [pair async for pair in stream]
    assert kinds(seen) == [
        "pending:decided",
        "session",
        "approval:resolved",
        "actauth:decision",
        *RAN[:4],
        *RAN[5:],  # a resumed batch is outside a step: no `step:finished` after it
    ]
    assert all(seq is not None for seq, _ in seen)  # from the log: committed, with their seqs
    committed_as_logged(seen, await log.read(KEY))


async def test_a_follower_switches_to_a_run_resumed_here_with_its_token_deltas(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(3, "all paid, thanks"))}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    stream = runtime.events(KEY, after=0, follow=True)
    replayed = await until(stream, "done")  # the paused run, from the log
    assert kinds(replayed) == [*ASKED, "actauth:decision", "step:finished", "loop:paused", "done"]
    [item] = await runtime.pending("acme")
    resolved = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    rest = [pair async for pair in stream]
    assert resolved.run is not None and rest[-1][1] == resolved.run.done
    deltas = [e.delta for _, e in rest if isinstance(e, ev.TextDelta)]
    assert "".join(deltas) == "all paid, thanks"  # live: the tokens came too
    assert kinds(rest)[:3] == ["pending:decided", "session", "approval:resolved"]
    committed_as_logged(replayed + rest, await runtime.log.read(KEY))


async def test_a_follower_gets_a_run_that_started_and_ended_before_it_looked(logs, runtimes):
    """The run resumed here ends before the follower reads on (nothing in it waits): the
    follower still gets that run's own events, token deltas too, not the log's."""
    runtime = runtimes({"payer": payer(*pays(3, "all paid, thanks"))}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    stream = runtime.events(KEY, after=0, follow=True)
    replayed = await until(stream, "done")  # the paused run, from the log
    [item] = await runtime.pending("acme")
    resolved = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.run is not None
    await ended(resolved.run)
    assert runtime.live.get(KEY) is None  # (gone from the runs in progress)
    rest = [pair async for pair in stream]
    assert rest[-1][1] == resolved.run.done
    deltas = [e.delta for _, e in rest if isinstance(e, ev.TextDelta)]
    assert "".join(deltas) == "all paid, thanks"
    committed_as_logged(replayed + rest, await runtime.log.read(KEY))


async def test_a_holder_that_goes_away_leaves_a_durable_pause(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer(*pays(1))}, log)
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    await until(stream, "pending:requested")  # the run waits for a decision, live
    await stream.aclose()  # the client disconnects
    assert (await ended(live)).stop_reason == "paused"
    [item] = await runtime.pending("acme")
    assert item.status == "open" and (await runtime.session(KEY)).status == "paused"
    assert paid == []
    resumed = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resumed.run is not None and (await ended(resumed.run)).text == "all paid"


async def test_seqs_are_only_those_of_committed_events(logs, runtimes):
    held = Held()
    log = await logs()
    runtime = runtimes({"payer": Agent(name="payer", model=held.model, tools=[look])}, log)
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    thinking = await until(stream, "budget:check")  # the model has not replied yet
    assert [(seq, e.type) for seq, e in thinking] == [
        (1, "session"),
        (2, "input:received"),
        (None, "step:started"),  # not in the log yet: no id a client could resume after
        (None, "budget:check"),
    ]
    assert (await log.session(KEY)).last_seq == 2
    held.give({"tool_calls": [call("look", "l1", n=1)]})
    held.give("seen it")
    rest = [pair async for pair in stream]
    assert all(seq is None for seq, e in rest if e.type.endswith(":delta"))
    committed = [e.type for seq, e in rest if seq is not None]
    assert {"message:completed", "tool:started", "tool:result", "done"} <= set(committed)
    stored = await log.read(KEY)
    committed_as_logged(thinking + rest, stored)
    resumed = [s.event.type for s in await log.read(KEY, after=2)]  # Last-Event-ID: 2
    assert resumed[:2] == ["step:started", "budget:check"]  # nothing was skipped
    assert [s.event.type for s in stored] == kinds(thinking + rest)
    late = [pair async for pair in runtime.events(KEY, after=0, follow=True)]
    assert late == [(s.seq, s.event) for s in stored]  # the session ended: the log, then done


async def test_a_late_follower_of_a_live_run_gets_each_event_once(logs, runtimes):
    held = Held()
    log = await logs()
    runtime = runtimes({"payer": Agent(name="payer", model=held.model)}, log)
    live = await runtime.send("acme", "payer", "s1", "first", hold=True)
    await held.asked.wait()
    mid = (await log.session(KEY)).last_seq  # the input is in, the reply is not
    late = runtime.events(KEY, after=mid - 1, follow=True)
    live.detach()
    held.give("the answer")
    seen = [pair async for pair in late]
    assert kinds(seen) == [
        "input:received",
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    assert seen[0][0] == mid
    committed_as_logged(seen, await log.read(KEY))


async def test_the_stream_of_a_run_that_ended_before_it_was_read_has_its_token_deltas(
    logs, runtimes
):
    """A run that needs no thread and no wait can end before its caller reads its stream
    (the log's calls made on the event loop): the stream is still the run's own, deltas and
    all, not the log's."""
    answer = Reply(text="all done", chunk=3)
    runtime = runtimes({"quick": Agent(model=FunctionModel(lambda r: answer))}, await logs())
    live = await runtime.send("acme", "quick", "s1", "go", hold=True)
    await ended(live)  # (gone from the runs in progress)
    seen = [pair async for pair in live.stream()]
    assert [e.delta for _, e in seen if type(e) is ev.TextDelta] == ["all", " do", "ne"]
    assert [e.type for _, e in seen] == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "text:delta",
        "text:delta",
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    assert runtime.live.get(SessionKey("acme", "quick", "s1")) is None
    committed_as_logged(seen, await runtime.log.read(SessionKey("acme", "quick", "s1")))


async def test_a_decision_made_here_wakes_the_run_waiting_on_it(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    await until(stream, "pending:requested")
    [item] = await runtime.pending("acme")
    resolved = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert (resolved.status, resolved.run) == ("resumed", live)  # it goes on: no second run
    rest = [pair async for pair in stream]
    assert kinds(rest) == ["pending:decided", "approval:resolved", "actauth:decision", *RAN]
    assert (await ended(live)).stop_reason == "completed" and paid == [1]


async def test_a_held_stream_is_kept_alive_through_a_pause(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    end = (await runtime.session(KEY)).last_seq
    stream = batches(runtime.events(KEY, after=end, follow=True), 0.01)
    assert await anext(stream) is None  # nothing happens: a keep-alive
    [item] = await runtime.pending("acme")
    await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    rest = [pair async for batch in stream if batch is not None for pair in batch]
    assert kinds(rest)[:3] == ["pending:decided", "session", "approval:resolved"]
    assert rest[-1][1].type == "done" and rest[-1][1].stop_reason == "completed"


async def test_no_token_delta_takes_the_seq_of_a_carry_over_commit(logs, runtimes):
    """A reply streamed past `partial_every` commits its text so far as `message:partial`, which
    no stream carries: once that event is freed, a later delta must not inherit its seq."""

    async def reply(request: Any) -> Reply:
        return Reply(text="x" * 300, chunk=1)

    agent = Agent(name="payer", model=FunctionModel(reply))
    runtime = runtimes({"payer": agent}, await logs(), partial_every=0)
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    items = [pair async for pair in live.stream()]
    assert [seq for seq, e in items if e.type == "text:delta"] == [None] * 300
    stored = await runtime.log.read(KEY)
    assert "message:partial" in [s.event.type for s in stored]
    committed_as_logged(items, stored)


async def test_a_stream_shows_a_reply_only_once_the_log_holds_it(logs, runtimes):
    """A reply is committed with what follows it (its call's intent, or the run's end): the run
    holds it from its streams until then, so no stream shows a reply a crash could lose (P8).
    Between the two, a `before_tool` hook waits: the reply is not published meanwhile."""
    entered, release = asyncio.Event(), asyncio.Event()

    async def before_tool(info: Any, call: Any) -> None:
        entered.set()
        await release.wait()

    agent = payer(
        {"tool_calls": [call("look", "c1", n=1)]}, "seen", hooks=Hooks(before_tool=before_tool)
    )
    runtime = runtimes({"payer": agent}, await logs())
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    reading = asyncio.ensure_future(until(stream, "step:finished"))
    await entered.wait()  # the run waits between its reply and the call's intent
    shown = [e.type for e in live.items if not e.type.endswith(":delta")]
    assert shown == ["session", "input:received", "step:started", "budget:check"]
    release.set()
    items = await reading + [pair async for pair in stream]
    replies = [(seq, e.message.text) for seq, e in items if e.type == "message:completed"]
    assert [text for _, text in replies] == ["", "seen"]
    assert None not in [seq for seq, _ in replies]
    committed_as_logged(items, await runtime.log.read(KEY))


async def test_a_follower_past_the_end_of_a_session_that_ended_ends_at_once(logs, runtimes):
    runtime = runtimes({"payer": payer("hello")}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    end = (await runtime.session(KEY)).last_seq
    async with asyncio.timeout(60):  # a safety net: it used to wait for a next run
        assert [pair async for pair in runtime.events(KEY, after=end, follow=True)] == []
    last = [pair async for pair in runtime.events(KEY, after=end - 1, follow=True)]
    assert [(seq, e.type) for seq, e in last] == [(end, "done")]


async def test_closing_the_runtime_leaves_a_held_run_paused_durably(logs, runtimes):
    """A run waiting for a decision on a held stream is not cancelled by `close` (which would
    close its item): it pauses durably, and is resumed later from anywhere."""
    here = runtimes({"payer": payer(*pays(1))}, await logs())
    live = await here.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    await until(stream, "pending:requested")  # held: the run waits for a decision
    await here.close()
    assert (await ended(live)).stop_reason == "paused"
    await stream.aclose()
    elsewhere = runtimes({"payer": payer(*pays(1))}, await logs())
    [item] = await elsewhere.pending("acme")
    assert (item.status, (await elsewhere.session(KEY)).status, paid) == ("open", "paused", [])
    resumed = await elsewhere.resolve("acme", item.id, Approval.approve(by="bo"))
    assert resumed.run is not None and (await ended(resumed.run)).text == "all paid"
    assert paid == [1]


async def test_a_follower_of_a_run_cancelled_at_its_prompt_ends_at_its_done(logs, runtimes):
    """A run cancelled while it waits for a decision closes its item after its `done` (a
    `pending:decided` follows the `done` in the log): a follower from the start, or from the
    `done`, still ends there instead of waiting for the session's next run."""
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    live = await runtime.send("acme", "payer", "s1", "go", hold=True)
    stream = live.stream()
    await until(stream, "pending:requested")
    assert runtime.cancel(KEY)
    assert (await ended(live)).stop_reason == "aborted"
    await stream.aclose()
    stored = await runtime.log.read(KEY)
    assert [s.event.type for s in stored[-2:]] == ["done", "pending:decided"]
    done = stored[-2].seq
    async with asyncio.timeout(60):  # a safety net: it used to wait for the next run
        items = [pair async for pair in runtime.events(KEY, after=0, follow=True)]
        assert [(s.seq, s.event) for s in stored[:-1]] == items
        rest = [pair async for pair in runtime.events(KEY, after=done, follow=True)]
        assert rest == []


async def test_closing_the_runtime_records_the_end_of_a_run_whose_thread_runs_on(logs, runtimes):
    """A thread that outlives `close`'s bound (and its run's `tool_grace`) does not keep the
    run from recording its end: the log has its `done` and the session is idle at once."""
    import threading

    from loopwright import tool

    entered, release = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Blocks its thread until the test releases it."""
        entered.set()
        release.wait(60)
        return "released"

    model = scripted({"tool_calls": [call("hold", "h")]})
    agent = Agent(name="payer", model=model, tools=[hold], tool_grace=60)
    log = await logs()
    here = runtimes({"payer": agent}, log)
    live = await here.send("acme", "payer", "s1", "go")
    assert await asyncio.to_thread(entered.wait, 60)
    try:
        await here.close(timeout=1.0)  # (the thread holds the run past the first bound)
    finally:
        release.set()
    assert (await ended(live)).stop_reason == "aborted"
    assert (await logged(log, KEY))[-3:] == ["step:finished", "loop:aborted", "done"]
    assert (await log.session(KEY)).status == "idle"


async def test_a_follower_ends_after_a_done_however_much_steering_came_after_it(logs, runtimes):
    """Steering sent while no run holds the session is logged for the next run; a follower
    of the run that ended before it stops at that run's `done` (it waited for a next run
    past 16 of them)."""
    runtime = runtimes({"payer": payer("hello")}, await logs())
    done = await ended(await runtime.send("acme", "payer", "s1", "go"))
    assert done.stop_reason == "completed"
    for n in range(40):
        await runtime.steer(KEY, f"steer {n}")
    async with asyncio.timeout(60):  # (a safety net: it used to wait for a next run)
        followed = [e.type async for _, e in runtime.events(KEY, after=0, follow=True)]
    assert followed[-1] == "done" and "steering:queued" not in followed


async def test_a_follower_waiting_on_the_log_is_cancelled_cleanly(logs, runtimes):
    """A follower of a paused session waits for its next run; cancelled, it ends cancelled
    (its read of the log stops before the reader closes: it raised RuntimeError)."""
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    assert (await ended(await runtime.send("acme", "payer", "s1", "go"))).stop_reason == "paused"
    seen: list[str] = []
    waiting = asyncio.Event()

    async def follow() -> None:
        async for _, event in runtime.events(KEY, after=0, follow=True):
            seen.append(event.type)
            if event.type == "done":
                waiting.set()  # (what follows is a wait for the next run)

    task = asyncio.create_task(follow())
    await waiting.wait()
    task.cancel()
    await asyncio.wait((task,))
    assert task.cancelled() and seen[-2:] == ["loop:paused", "done"]


async def test_a_steer_sent_as_a_run_releases_its_session_is_logged_for_the_next_run(
    logs, runtimes
):
    """A steer that comes once the run has its `done` (here while it releases its lease) is
    logged for the next run, which delivers it (it was kept in memory only, and lost)."""
    log = await logs()
    runtime = runtimes({"payer": payer("hello", "again")}, log)
    with releases_held(log) as (releasing, go_on):
        live = await runtime.send("acme", "payer", "s1", "go")
        await releasing.wait()
        steering = asyncio.create_task(runtime.steer(KEY, "and this"))  # (it runs first)
        go_on.set()
        await steering
        assert (await ended(live)).stop_reason == "completed"
    assert (await logged(log, KEY))[-2:] == ["done", "steering:queued"]
    next_run = await runtime.send("acme", "payer", "s1", "more")
    await ended(next_run)
    injected = [e for e in next_run.items if isinstance(e, ev.SteeringInjected)]
    assert [e.message.content for e in injected] == ["and this"]


async def test_what_was_queued_while_the_reader_was_away_comes_as_one_batch() -> None:
    """A stream's reader that falls behind sends on what was queued in one go (one SSE send),
    in order; the end, or a failure, comes after the batch before it."""

    async def burst() -> AsyncIterator[int]:
        for i in range(5):
            yield i  # (no await between: all five are queued before the reader is back)

    async def failing() -> AsyncIterator[int]:
        yield 1
        yield 2
        raise ValueError("the log went away")

    assert [b async for b in batches(burst(), 10.0)] == [[0, 1, 2, 3, 4]]
    got: list[list[int] | None] = []
    with pytest.raises(ValueError, match="the log went away"):
        async for batch in batches(failing(), 10.0):
            got.append(batch)
    assert got == [[1, 2]]


async def test_a_stream_has_one_silence_timer_not_one_per_item(monkeypatch) -> None:
    """`batches` arms one timer a stream, moved on lazily (issue 32: a timer armed and
    cancelled per delta, times a thousand streams, was a heap entry per delta); a silence of
    `every` still gives a keep-alive."""
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, callback, *args, **kwargs)

    go_on = asyncio.Event()

    async def paced() -> AsyncIterator[int]:
        for i in range(100):
            await asyncio.sleep(0)  # (the reader takes each before the next)
            yield i
        await go_on.wait()  # a silence, then the end
        yield 100

    monkeypatch.setattr(loop, "call_at", counted)
    stream = batches(paced(), 60.0)
    got = [await anext(stream) for _ in range(100)]
    assert got == [[i] for i in range(100)] and len(armed) == 1
    monkeypatch.setattr(loop, "call_at", call_at)
    silent = batches(paced(), 0.01)
    seen: list[int] = []
    while len(seen) < 100:  # (a slow machine may see a keep-alive between two items)
        seen += await anext(silent) or []
    assert seen == list(range(100))
    assert await anext(silent) is None  # the silence: a keep-alive
    go_on.set()
    assert [b async for b in silent if b is not None] == [[100]]
    await stream.aclose()
