"""The reducer (`loopwright.state.replay`) against the live run, on sessions kept in an event log (a
real SQLite file): random runs (tool calls, live approvals and denials, durable pauses resolved
through the runtime and resumed, cancels, compactions, steering, model failures), driven through
either door — a script's session (`runtime.open_session`) or the `Runtime` — and, at every
commit the run makes, the state folded from the log so far against the live state recorded at
that commit; then the snapshot round trip at every point of each log.

The live state is made by the same reducer, each event applied as the run yields it, before the
journal sees it: at a commit it must equal the fold of the log up to that commit. What the run
holds outside that state is compared too: the text it streamed so far (the log's carry-over
while a reply streams). The queues of steering and follow-ups are the state's (`apply` is their
only writer: a steer logs `steering:queued`, a cancel `steering:cleared`), so they are compared
as the rest is, at every commit.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from conftest import drive, verify
from long_run import examples
from loopwright import DEFER, Agent, Approval, Rules, tool
from loopwright import events as ev
from loopwright.loop import session as session_module  # (it makes each run's Steps)
from loopwright.loop.steps import Steps
from loopwright.runtime import LogJournal, Runtime, Settings, open_session
from loopwright.runtime.decisions import decision_of
from loopwright.state.compaction import SUMMARY_SYSTEM, Compaction
from loopwright.state.replay import continued, fold
from loopwright.state.session_state import SessionState
from loopwright.state.snapshots import from_snapshot, to_snapshot
from loopwright.store.log import EventLog, SessionKey, Verdict
from loopwright.store.opening import open_log
from loopwright.testing import FunctionModel, Reply

RULES = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: no-drop, tool: drop, decision: deny}
  - {name: ask-pay, tool: pay, decision: ask}
""")


@dataclass
class Live:
    """What the test holds of the running session: its replies, its session and the `Steps` of
    its current run (the loop's state between steps), and what was recorded at each commit."""

    replies: deque[Any] = field(default_factory=deque)
    session: Any = None
    steps: Any = None
    commits: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


LIVE = Live()


class RecordedSteps(Steps):
    """`Steps` that the test can find: the run's state between steps."""

    def __post_init__(self) -> None:
        super().__post_init__()
        LIVE.steps = self


@tool
def ok(n: int) -> str:
    """Runs."""
    return f"ok {n}"


@tool
async def slow(n: int) -> str:
    """Awaits."""
    await asyncio.sleep(0)
    return f"slow {n}"


@tool
def pay(n: int) -> str:
    """Asked about."""
    return f"paid {n}"


@tool
def drop(n: int) -> str:
    """Denied by rule."""
    return "dropped"


@tool
async def nudge(n: int) -> str:
    """Sends the running session a steering message (even n) or a follow-up (odd n)."""
    (LIVE.session.steer if n % 2 == 0 else LIVE.session.follow_up)(f"nudge {n}")
    return f"nudged {n}"


@tool
async def halt(n: int) -> str:
    """Cancels the run it is called in."""
    LIVE.session.cancel()
    await asyncio.sleep(3600)  # the cancel lands here
    return "never"


TOOLS = [ok, slow, pay, drop, nudge, halt]
BY_NAME = {t.name: t for t in TOOLS}


def answer(request: Any) -> Reply | str:
    if request.system == SUMMARY_SYSTEM:
        return "the summary"
    return LIVE.replies.popleft() if LIVE.replies else "nothing more"


# ---- the two views compared at a commit ---------------------------------------------------------


def view_of(state: SessionState) -> dict[str, Any]:
    """What a run that died with this state would continue from (`continued(died=True)`): the
    history, and the batch it recovers (or the paused one) with the calls started but unfinished.
    """
    state = continued(state, died=True)
    history, recovery = state.history, state.recovery
    batch = state.checkpoint or recovery
    calls, results = (batch.calls, batch.results) if batch else ([], {})
    started = recovery.started if recovery else set()
    return {
        "messages": list(history.messages),
        "calls": [c.id for c in calls] if calls else None,
        "results": dict(results) if calls else None,
        "started": sorted(started - set(results)) if calls else None,
        "carry_over": state.carry_over,
        "steer": [text for mode, text in state.queued if mode == "steer"],
        "follow_up": [text for mode, text in state.queued if mode == "follow_up"],
        "usage": (history.chars, history.reported_tokens, history.chars_at_report),
        "compacted_at": history.compacted_at,
    }


def live_view() -> dict[str, Any]:
    """The same of the live run: the state its events made (the driver applies each one to it
    with the reducer, before the journal sees it), with what the run holds outside it: the text
    it streamed so far (the journal commits it as `message:partial`)."""
    run, state = LIVE.steps, LIVE.session.state
    mine = replace(state, queued=list(state.queued))  # (`continued` marks it: a copy)
    return {
        **view_of(mine),
        "carry_over": "".join(run.partial) if run.partial else state.carry_over,
    }


SEEN = {"loop:paused", "loop:aborted", "loop:error", "loop:denied", "loop:max_turns"}
SEEN |= {"compaction:finished", "steering:queued", "steering:injected", "loop:skipped"}


def watch(session: Any) -> Any:
    """Record the live state at every commit the run makes in its own task, suspended at the
    event it commits (a steering message is committed by a task of its own while the run goes
    on), of the session's journal (a `LogJournal` whose every streamed delta is committed, so
    that carry-over is exact)."""
    journal = session.journal
    assert isinstance(journal, LogJournal) and journal.settings.partial_every == 0.0
    commit = journal._commit

    async def recorded(extra: ev.Event | None = None) -> None:
        before = journal.last_seq
        await commit(extra)
        run = session._run  # a commit of the run's own task, which appended something
        if (run is None or asyncio.current_task() is run._task) and journal.last_seq != before:
            LIVE.session = session
            LIVE.commits.append((journal.last_seq, live_view()))

    journal._commit = recorded  # type: ignore[method-assign]
    return session


def check_commits(log: list[ev.Event]) -> None:
    assert LIVE.commits  # every scenario commits
    views = [view_of(state := SessionState(tools=BY_NAME))]
    for item in log:
        fold([item], BY_NAME, state)
        views.append(view_of(state))
    for n, live in LIVE.commits:
        assert live == views[n], (n, log[n - 1], live, views[n])


# ---- random sessions ----------------------------------------------------------------------------

names = st.sampled_from(["ok", "slow", "pay", "pay", "drop", "nudge", "halt", "ghost"])
call = st.tuples(names, st.sampled_from([0, 1, 2, 3, "x"]))
reply = st.integers(0, 9).flatmap(  # a failure, a final text, or one to three calls
    lambda k: st.just("fail") if k == 0 else st.lists(call, min_size=k > 1, max_size=3)
)
runs = st.lists(
    st.integers(0, 4).flatmap(
        lambda k: st.just("compact") if k == 0 else st.lists(reply, min_size=1, max_size=4)
    ),
    min_size=1,
    max_size=4,
)
answers = st.lists(st.sampled_from(["approve", "deny", "edit", "defer", "defer"]), max_size=10)
decisions = st.lists(st.sampled_from(["approve", "deny", "edit"]), min_size=6, max_size=6)


def scripted(run: int, batches: list[Any]) -> list[Any]:
    out: list[Any] = []
    for b, batch in enumerate(batches):
        if batch == "fail":
            fail = {"error": "gone", "after_text": f"half of {run}.{b}"}
            out.append(Reply.parse({"fail": fail}))
            continue
        tool_calls = [
            {"name": name, "args": {"n": n}, "id": f"c{run}_{b}_{i}"}
            for i, (name, n) in enumerate(batch)
        ]
        text = f"reply {run}.{b}" if b % 2 == 0 or not tool_calls else ""
        out.append(Reply.parse({"text": text, "tool_calls": tool_calls, "chunk": 4}))
    return out


def approval(kind: str, by: str) -> Approval:
    if kind == "edit":
        return Approval.approve(args={"n": 7}, by=by)
    if kind == "deny":
        return Approval.deny("no", by=by)
    return Approval.approve(by=by)


KEY = SessionKey("acme", "replayed", "s")
WHERE = (KEY.tenant, KEY.agent, KEY.id)


class Watched(Runtime):
    """A runtime whose sessions are watched at every commit."""

    async def open(self, key: SessionKey) -> Any:
        return watch(await super().open(key))


async def through(started: Any) -> Any:
    """Drive a run of the runtime to its end (and what follows it there); returns its session."""
    live = await started
    await live.task
    assert live.done is not None, live.failure
    verify(live.items)
    return live.session


async def scenario(path: Path, plan: list[Any], live_answers: list[str], later: list[str], **kw):
    door, every = kw.pop("door"), kw.pop("snapshot_every")
    agent = Agent(name=KEY.agent, model=FunctionModel(answer), tools=TOOLS, rules=RULES, **kw)
    log = await open_log(path)
    runtime = Watched({agent.name: agent}, log, partial_every=0.0, snapshot_every=every)
    config = Settings(partial_every=0.0, snapshot_every=every)
    queue = deque(live_answers)

    def approver(request: Any) -> Any:
        kind = queue.popleft() if queue else "approve"
        return DEFER if kind == "defer" else approval(kind, "live")

    async def reopened() -> Any:
        if door == "runtime":
            return await runtime.open(KEY)
        return watch(await open_session(agent, log, KEY.id, tenant=KEY.tenant, settings=config))

    session = await reopened()
    try:
        for r, step in enumerate([*plan, None]):  # None: a last pause is resolved too
            LIVE.replies.clear()
            paused = session.state.checkpoint is not None
            if step is None and not paused:
                break
            if paused:  # decided through the runtime, then resumed
                for pending_id in list(session.state.checkpoint.pending):
                    await decide(runtime, pending_id, approval(later[r % len(later)], "ops"))
                session = await reopened()
                await check_decisions(log, session)
            if step not in ("compact", None):
                LIVE.replies.extend(scripted(r, step))
            text = None if paused else f"input {r}"
            if door == "session":
                compacting = text is not None and step == "compact"
                await drive(
                    session.compact() if compacting else session.run(text, approver=approver)
                )
            elif text is None:
                session = await through(runtime.resume(*WHERE, approver=approver))
            elif step == "compact":
                session = await through(runtime.compact(*WHERE))
            else:
                session = await through(runtime.send(*WHERE, text, approver=approver))
            await check_end(log, session, door)
        log_events = [s.event for s in await log.read(KEY)]
        for kind in {e.type for e in log_events} & SEEN:
            event(kind)
        check_commits(log_events)
        check_snapshots(log_events)
    finally:
        await runtime.close()
        await log.close()


async def decide(runtime: Runtime, pending_id: str, decided: Approval) -> None:
    """Decide an item through the runtime (without resuming) while the same decision races it
    straight into the log: exactly one of the two is recorded while the item is open (none once
    a denial skipped it); a later decision changes nothing and reads the first one."""
    log = runtime.log
    was = (await log.pending_item(KEY.tenant, pending_id)).status
    resolved, rival = await asyncio.gather(
        runtime.resolve(KEY.tenant, pending_id, decided, resume=False),
        log.decide(KEY.tenant, pending_id, decision_of(decided)),
    )
    assert resolved.status in ("waiting", "already_resolved")
    assert [resolved.status == "waiting", rival.changed].count(True) == (was == "open")
    late = await log.decide(KEY.tenant, pending_id, Verdict("denied", by="late"))
    assert not late.changed and late.item == rival.item == resolved.item
    assert late.item.status != "open" and late.item.decided_by != "late"


async def check_end(log: EventLog, session: Any, door: str) -> None:
    """After a run: the history folded from the log is the live one, field by field, and so is
    the checkpoint of a paused batch; the newest snapshot is the log's state at its seq; the session's items open in the log are the paused
    batch's undecided ones, in call order (every other item is closed); through the runtime,
    every decision a run acted on is the one the log recorded before it (one authority)."""
    stored = [s.event for s in await log.read(KEY)]
    rebuilt = continued(fold(stored, BY_NAME), died=False)
    live = session.state
    assert rebuilt.history == live.history
    assert (rebuilt.carry_over, rebuilt.queued) == (live.carry_over, live.queued)
    assert rebuilt.recovery is None and live.recovery is None
    assert shape(rebuilt.checkpoint) == shape(live.checkpoint)
    snapshot = await log.snapshot(KEY)  # the run's own state when it is the log's
    if snapshot is not None:
        assert from_snapshot(snapshot.data, BY_NAME) == fold(stored[: snapshot.seq], BY_NAME)
    record = await log.session(KEY)
    assert record.status == ("paused" if live.checkpoint else "idle")
    assert record.last_seq == len(stored)
    page = await log.pending(KEY.tenant, session=KEY)
    asked = live.checkpoint.pending.items() if live.checkpoint else ()
    assert [p.id for p in page.items] == [i for i, p in asked if p.decision is None]
    first: dict[str, ev.PendingDecided] = {}
    for e in stored:
        if isinstance(e, ev.PendingDecided):
            assert first.setdefault(e.id, e) is e, e  # single use
        elif isinstance(e, ev.ApprovalResolved) and door == "runtime":
            recorded = first.get(e.id)
            assert recorded is not None and (recorded.by, recorded.args) == (e.by, e.args), e
            assert recorded.status in ACTED[e.decision], (e, recorded)


ACTED = {"approve": ("approved",), "deny": ("denied", "skipped")}
"""The decisions recorded in the log (`pending:decided`) a run acts on so."""


def shape(checkpoint: Any) -> Any:
    if checkpoint is None:
        return None
    return (
        [c.id for c in checkpoint.calls],
        checkpoint.results,
        [(i, p.request, p.decision, p.resolved_at) for i, p in checkpoint.pending.items()],
        checkpoint.closed,
        sorted(checkpoint.suspended),
    )


async def check_decisions(log: EventLog, session: Any) -> None:
    """The reopened session's checkpoint holds the log's decisions, as the log's items record
    them (a skipped item has none), and is the one the whole log folds to (the session may have
    been opened from a snapshot and the events after it)."""
    records = {p.id: p for p in (await log.pending(KEY.tenant, session=KEY, status=None)).items}
    checkpoint = session.state.checkpoint
    for pending_id, item in checkpoint.pending.items():
        record = records[pending_id]
        if record.status in ("approved", "denied"):
            assert item.decision == Approval(
                approved=record.status == "approved",
                args=record.edited_args,
                reason=record.note,
                by=record.decided_by,
            )
            assert item.resolved_at == record.decided_at
        else:
            assert record.status == "skipped" and item.decision is None
    stored = [s.event for s in await log.read(KEY)]
    assert shape(continued(fold(stored, BY_NAME), died=False).checkpoint) == shape(checkpoint)


def check_snapshots(log: list[ev.Event]) -> None:
    """Snapshot at every point of the log, restore, fold the rest: the whole log's state. A
    second decision on an item changes nothing: the first one wins."""
    whole = fold(log, BY_NAME)
    text = to_snapshot(whole)
    expected = continued(fold(log, BY_NAME), died=True)
    for n in range(len(log) + 1):
        restored = from_snapshot(to_snapshot(prefix := fold(log[:n], BY_NAME)), BY_NAME)
        assert restored == prefix, n
        state = fold(log[n:], BY_NAME, restored)
        assert state == whole, n
        assert to_snapshot(state) == text
        assert continued(state, died=True) == expected
        assert shape(state.checkpoint) == shape(expected.checkpoint)
    state, late = SessionState(tools=BY_NAME), SessionState(tools=BY_NAME)
    for e in log:
        fold([e], BY_NAME, state)
        second = [replace(e, status="denied", by="late")] if e.type == "pending:decided" else []
        assert fold([e, *second], BY_NAME, late) == state


@settings(
    max_examples=examples(quick=25, long=400),
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    plan=runs,
    live_answers=answers,
    later=decisions,
    on_deny=st.sampled_from(["stop", "continue"]),
    max_turns=st.integers(2, 6),
    policy=st.sampled_from([None, "discard", "summarize"]),
    door=st.sampled_from(["session", "runtime"]),
    snapshot_every=st.sampled_from([1, 200]),
)
@example(  # a reply cut off by a failure, twice: the second run's carry-over is its own
    plan=[["fail"], ["fail"]],
    live_answers=[],
    later=["approve"] * 6,
    on_deny="stop",
    max_turns=2,
    policy=None,
    door="session",
    snapshot_every=200,
)
@example(  # a deferred item whose batch a denial closed is closed at the run's end; a pause
    plan=[[[("pay", 1), ("drop", 1)]], [[("pay", 2), ("pay", 3)]]],
    live_answers=["defer", "defer", "defer"],
    later=["deny"] * 6,
    on_deny="stop",
    max_turns=3,
    policy=None,
    door="runtime",
    snapshot_every=1,
)
@example(  # with on_deny continue, a live denial still closes the ask deferred before it
    plan=[[[("pay", 0), ("pay", 0)]]],
    live_answers=["defer", "deny"],
    later=["approve"] * 6,
    on_deny="continue",
    max_turns=2,
    policy=None,
    door="session",
    snapshot_every=1,
)
def test_the_state_rebuilt_from_the_log_is_the_live_state(
    plan, live_answers, later, on_deny, max_turns, policy, door, snapshot_every
):
    compaction = Compaction(mode=policy, every_steps=2, keep_last=2) if policy else None
    original = session_module.Steps
    session_module.Steps = RecordedSteps  # type: ignore[misc]
    LIVE.commits.clear()
    event(door)
    options = {"on_deny": on_deny, "max_turns": max_turns, "compaction": compaction, "door": door}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "loopwright.db"
            asyncio.run(
                scenario(path, plan, live_answers, later, snapshot_every=snapshot_every, **options)
            )
    finally:
        session_module.Steps = original  # type: ignore[misc]
