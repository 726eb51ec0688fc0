"""Forking a stored session from Python (`runtime.forking.fork`) on real SQLite and PostgreSQL
logs: at the end, mid-conversation, at a pending approval (decided differently in the fork), and
inside a run (recovered as a run that died there); the fork then goes on with a scripted model
while its source stays byte for byte as it was."""

from __future__ import annotations

import pytest

from fork_fixtures import *  # noqa: F403 (the fixture: backend)
from fork_fixtures import Backend
from loopwright import Approval
from loopwright.errors import SessionBusy, UnknownSession
from loopwright.gate.decide import INTERRUPTED, MAY_HAVE_RUN
from loopwright.runtime.forking import CannotFork, fork, lineage
from loopwright.store.log import Lineage, SessionKey
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, pg_logs, runtimes)
from runtime_fixtures import KEY, ended, logged, paid, payer, pays
from test_runtime import PAUSED_RUN, RESUMED_RUN

CHAT = ["session", "input:received", "step:started", "budget:check", "message:completed"]
ANSWERED = [*CHAT, "step:finished", "loop:done", "done"]


async def test_a_fork_at_a_pending_approval_is_decided_differently(backend: Backend, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await backend.log())
    assert (await ended(await runtime.send("acme", "payer", "s1", "go"))).stop_reason == "paused"
    [asked] = await runtime.pending("acme")
    before = backend.rows(KEY)
    new = await fork(runtime, KEY, new_id="s1-denied")  # at the end: its last seq
    assert new == SessionKey("acme", "payer", "s1-denied")
    record = await runtime.session(new)
    assert (record.status, record.last_seq, record.forked_from) == ("paused", 11, Lineage("s1", 11))
    assert lineage(record) == {"session": "s1", "seq": 11}
    [mine] = await runtime.pending("acme", session=new)
    assert (mine.status, mine.tool, mine.args, mine.call_id) == ("open", "pay", {"n": 1}, "p1")
    assert mine.id != asked.id and mine.id.startswith("apr_")
    denied = await runtime.resolve("acme", mine.id, Approval.deny("not today", by="ann"))
    assert denied.status == "resumed" and denied.run is not None
    assert (await ended(denied.run)).stop_reason == "denied"
    assert paid == []
    assert backend.rows(KEY) == before  # the source: every row as it was
    assert [p.id for p in await runtime.pending("acme")] == [asked.id]  # still open there
    approved = await runtime.resolve("acme", asked.id, Approval.approve(by="bo"))
    assert approved.run is not None and (await ended(approved.run)).text == "all paid"
    assert paid == [1]
    assert await logged(await backend.log(), KEY) == [*PAUSED_RUN, "pending:decided", *RESUMED_RUN]
    # the fork goes on as any session: a message, answered by the model (a scripted model
    # answers by its place in the conversation: its second reply)
    later = await runtime.send("acme", "payer", new.id, "hello")
    assert (await ended(later)).text == "all paid"
    assert paid == [1]
    fork_log = await logged(runtime.log, new)
    assert fork_log[:12] == [*PAUSED_RUN, "pending:decided"]
    assert fork_log[12:] == ["session", "approval:resolved", "actauth:decision", *fork_log[15:]]
    assert fork_log[-1] == "done"
    usage = await runtime.usage("acme", new)
    assert usage["requests"] == 1  # its own reply only: the copied one was billed to s1


async def test_a_fork_mid_conversation_goes_another_way(backend: Backend, runtimes):
    agent = payer("first answer", "second answer")  # (scripted: by place in the conversation)
    runtime = runtimes({"payer": agent}, await backend.log())
    await ended(await runtime.send("acme", "payer", "s1", "one"))
    at = len(ANSWERED)  # the first run's `done`
    await ended(await runtime.send("acme", "payer", "s1", "two"))
    before = backend.rows(KEY)
    new = await fork(runtime, KEY, at=at)
    assert len(new.id) == 32 and new.id != KEY.id  # a fresh id
    record = await runtime.session(new)
    assert (record.status, record.last_seq, record.forked_from) == ("idle", at, Lineage("s1", at))
    copied = [e for _, e in [item async for item in runtime.events(new)]]
    source = [s.event for s in await runtime.read(KEY, limit=at)]
    assert copied[1:] == source[1:] and copied[0].session_id == new.id  # type: ignore[attr-defined]
    done = await ended(await runtime.send("acme", "payer", new.id, "three"))
    assert done.text == "second answer"
    said = [
        e.message.content
        for _, e in [i async for i in runtime.events(new)]
        if e.type == "input:received"
    ]
    assert said == ["one", "three"]
    assert backend.rows(KEY) == before
    assert await logged(runtime.log, KEY) == ANSWERED * 2
    assert (await runtime.usage("acme", KEY))["requests"] == 2
    assert (await runtime.usage("acme", new))["requests"] == 1


async def test_a_fork_inside_a_run_is_recovered_as_a_run_that_died_there(
    backend: Backend, runtimes
):
    runtime = runtimes({"payer": payer(*pays(1))}, await backend.log())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    [asked] = await runtime.pending("acme")
    resumed = await runtime.resolve("acme", asked.id, Approval.approve(by="bo"))
    assert resumed.run is not None and (await ended(resumed.run)).text == "all paid"
    assert paid == [1]
    events = [s for s in await runtime.read(KEY)]
    started = next(s.seq for s in events if s.event.type == "tool:started")
    before = backend.rows(KEY)
    new = await fork(runtime, KEY, at=started)  # the intent logged, its result not
    record = await runtime.session(new)
    assert (record.status, record.forked_from) == ("interrupted", Lineage("s1", started))
    done = await ended(await runtime.send("acme", "payer", new.id, "and now?"))
    assert done.text == "all paid"
    assert paid == [1]  # the call is not run again in the fork (P3): it was interrupted
    after = [s.event for s in await runtime.read(new, after=started)]
    interrupted = [e for e in after if e.type == "tool:interrupted"]
    assert [(e.id, e.tool) for e in interrupted] == [("p1", "pay")]  # type: ignore[attr-defined]
    [told] = [e for e in after if e.type == "tool:output"]
    assert told.content == MAY_HAVE_RUN  # type: ignore[attr-defined]
    assert backend.rows(KEY) == before


@pytest.mark.parametrize(
    ("where", "recovered"),
    [
        # the reply logged, its call not yet decided: it did not run, and is told so
        ("message:completed", ["run:interrupted", "tool:interrupted", "tool:output"]),
        # the step under way, no reply yet: nothing to interrupt; the next run asks the model anew
        ("budget:check", ["run:interrupted", "input:received", "step:started"]),
    ],
)
async def test_a_fork_mid_step_is_recovered_as_a_run_that_died_there(
    backend: Backend, runtimes, where: str, recovered: list[str]
):
    runtime = runtimes({"payer": payer(*pays(1))}, await backend.log())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    at = PAUSED_RUN.index(where) + 1
    new = await fork(runtime, KEY, at=at)
    assert (await runtime.session(new)).status == "interrupted"
    await ended(await runtime.send("acme", "payer", new.id, "again"))
    after = [s.event for s in await runtime.read(new, after=at)]
    assert [e.type for e in after][1 : len(recovered) + 1] == recovered
    told = [e.content for e in after if e.type == "tool:output"]  # type: ignore[attr-defined]
    assert told == ([INTERRUPTED] if where == "message:completed" else [])
    assert paid == []


async def test_bad_forks_are_refused_and_leave_nothing(backend: Backend, runtimes):
    runtime = runtimes({"payer": payer("hi")}, await backend.log())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    before = backend.rows(KEY)
    for at in (0, 9):
        with pytest.raises(
            CannotFork, match=r"seq \d is not in session 's1' \(its events are 1..8\)"
        ):
            await fork(runtime, KEY, at=at, new_id="f")
    with pytest.raises(CannotFork, match="session id 's1' is in use"):
        await fork(runtime, KEY, new_id="s1")
    with pytest.raises(CannotFork, match="is not valid"):
        await fork(runtime, KEY, new_id="bad\nid")
    for foreign in (SessionKey("globex", "payer", "s1"), SessionKey("acme", "payer", "nope")):
        with pytest.raises(UnknownSession):
            await fork(runtime, foreign)
    assert [r.key.id for r in (await runtime.sessions("acme")).items] == ["s1"]
    assert backend.rows(KEY) == before
    other = await fork(runtime, KEY, new_id="f")
    with pytest.raises(UnknownSession):  # a fork stays in its tenant
        await runtime.session(SessionKey("globex", "payer", other.id))
    fork_of_fork = await fork(runtime, other, at=2, new_id="f2")
    assert (await runtime.session(fork_of_fork)).forked_from == Lineage("f", 2)


async def test_a_fork_inside_a_run_at_its_approval_keeps_the_approval_pending(
    backend: Backend, runtimes
):
    runtime = runtimes({"payer": payer(*pays(1))}, await backend.log())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    at = PAUSED_RUN.index("pending:requested") + 1  # the run had not paused yet
    new = await fork(runtime, KEY, at=at)
    assert (await runtime.session(new)).status == "interrupted"
    [mine] = await runtime.pending("acme", session=new)
    with pytest.raises(SessionBusy, match="is paused on pending items"):  # as a run that died
        await runtime.send("acme", "payer", new.id, "hello")  # there: its item stands
    denied = await runtime.resolve("acme", mine.id, Approval.deny("no", by="ann"))
    assert denied.run is not None and (await ended(denied.run)).stop_reason == "denied"
    assert paid == []
    assert [p.status for p in await runtime.pending("acme", status=None)] == ["open", "denied"]


async def test_a_fork_before_its_approval_was_tied_to_a_call_skips_it(backend: Backend, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await backend.log())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    at = PAUSED_RUN.index("approval:pending") + 1  # announced, not yet tied to its call
    new = await fork(runtime, KEY, at=at)
    done = await ended(await runtime.send("acme", "payer", new.id, "again"))
    assert done.text == "all paid" and paid == []
    recovered = await logged(runtime.log, new, after=at)
    assert recovered[:6] == [
        "pending:decided",
        "session",
        "run:interrupted",
        "tool:interrupted",
        "tool:output",
        "tool:result",
    ]
    [item] = await runtime.pending("acme", session=new, status=None)
    assert item.status == "skipped"  # closed by the recovery, as a dead run's would be
