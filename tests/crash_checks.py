"""One case of the crash model checker: play a scenario in process A until its fault, recover in
process B as the next actors would, and check P1-P4 (see crash_model.py for the machinery).

Recovery is what really comes next. First, within A's lease (B's clock is A's): the client whose
decision got no answer sends it again, and a person decides every item listed open (from
another terminal, say, when A was a CLI run waiting at its prompt). Then a lease later (B's
clock moves an hour): every item listed open is decided again as the scenario decides it, a
decision that resumes a run waits for its end, and a new message is sent ("continue"), which
must be taken and complete. A frozen A is then let go on: its writes must be refused and its
late tool effects must not contradict the log. The outbox scenario's deliverer (B's) then
sends what is due.

The checks, over every session of the case's tenant, the items, and the ledger:
- P1: every acknowledged input, decision, steer, follow-up and cancel is in the log;
  every item's notices (pending, resolved) reached the webhook (outbox scenario).
- P2: every session's seqs are 1..n; a stopped writer's writes after the takeover were refused.
- P3: no tool ran twice; every call logged started has exactly one result; no result says a
  call "did not complete" that the ledger shows ran after the takeover.
- P4: nothing is left open; every approved or answered item's call ran (or was logged started
  and then interrupted by the crash: its result says it may have run), every denied or skipped
  one never ran; the next message is taken.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crash_model import CURRENT, OUTBOX_WRITES, Fault, Faulty, Ledger, Process, Write, bury, never
from crash_scenarios import CLERK, NOTIFY, SESSION, Ctx, Hook, Scenario, agents, decisions_of
from loopwright import Approval
from loopwright import events as ev
from loopwright.errors import SessionBusy
from loopwright.gate.decide import INTERRUPTED, MAY_HAVE_RUN
from loopwright.notify.worker import Deliverer
from loopwright.runtime import Runtime
from loopwright.state.replay import fold
from loopwright.store.log import EventLog
from loopwright.store.outbox import outbox_of

LEASE = 30.0
SAFETY = 30.0
"""Seconds a case waits for a run before it calls it stuck (a safety net, never a sync)."""


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


OpenLog = Callable[[Clock], Awaitable[EventLog]]


@dataclass
class Result:
    writes: list[Write]
    """Process A's writes, in order."""
    completed: bool
    violations: list[str] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)


def runtime(process: Process, real: EventLog, gate: asyncio.Event) -> Runtime:
    log: Any = Faulty(real, process)
    return Runtime(agents(gate), log, ttl=LEASE, partial_every=1e12, sleep=never)


def deliverer(real: EventLog, process: Process, ledger: Ledger, clock: Clock) -> Deliverer:
    worker = Deliverer(Runtime({}, real), [Hook(ledger)], NOTIFY, clock=clock)
    worker.reading = Runtime({}, Faulty(real, process))  # (its items: through the runtime)
    worker.outbox = Faulty(outbox_of(real), process, OUTBOX_WRITES)  # type: ignore[assignment]
    return worker


async def play(scenario: Scenario, ctx: Ctx, process: Process) -> None:
    for step in scenario.steps:
        process.step = step.name
        await step.act(ctx)


async def run_case(
    open_log: OpenLog, scenario: Scenario, tenant: str, fault: Fault | None
) -> Result:
    ledger, gate, clock = Ledger(), asyncio.Event(), Clock(time.time())
    a = Process("A", ledger, fault)
    real_a = await open_log(clock)
    ctx = Ctx(runtime(a, real_a, gate), tenant, ledger, gate)
    if scenario.outbox:
        ctx.deliverer = deliverer(real_a, a, ledger, clock)
    baseline = asyncio.all_tasks()
    token = CURRENT.set(a)
    client = asyncio.ensure_future(play(scenario, ctx, a))
    CURRENT.reset(token)
    stopped = asyncio.ensure_future(a.stopped.wait())
    await asyncio.wait((client, stopped), return_when=asyncio.FIRST_COMPLETED, timeout=SAFETY)
    stopped.cancel()
    completed = client.done()
    if completed:
        client.result()  # (a failure of the scenario itself is the test's)
    else:
        assert a.stopped.is_set(), f"{scenario.name}: stuck at {a.step} with no fault"
        if fault is not None and fault.kind == "freeze":
            client.cancel()  # (its client hangs up)
    result = Result(list(a.writes), completed, ledger=ledger)
    b = Process("B", ledger)
    b_clock = Clock(clock.now)
    real_b = await open_log(b_clock)
    token = CURRENT.set(b)
    try:
        b_ctx = Ctx(runtime(b, real_b, gate), tenant, ledger, gate, acks=ctx.acks)
        if scenario.outbox:
            b_ctx.deliverer = deliverer(real_b, b, ledger, b_clock)
        gate.set()  # (B's model never waits)
        result.violations += await recover(scenario, b_ctx, b_clock, a, completed)
        if fault is not None and fault.kind == "freeze" and not completed:
            result.violations += await thaw(a, ctx, b_ctx, real_b, decisions_of(scenario))
        result.violations += await check(scenario, b_ctx, real_b)
    finally:
        await b_ctx.runtime.close()
        CURRENT.reset(token)
        await real_b.close()
    if fault is not None and fault.kind == "crash" and not completed:
        await real_a.close()  # (under the tasks it left, waiting in `Faulty`: the store's own end)
        await bury(a, asyncio.all_tasks() - baseline - {asyncio.current_task()})
    else:
        token = CURRENT.set(a)
        await ctx.runtime.close()
        CURRENT.reset(token)
        await real_a.close()
    return result


async def recover(
    scenario: Scenario, ctx: Ctx, clock: Clock, a: Process, completed: bool
) -> list[str]:
    decisions = decisions_of(scenario)
    runtime = ctx.runtime
    if not completed:  # within A's lease: the decision retried, the items listed decided
        step = next(s for s in scenario.steps if s.name == a.step)
        if step.call is not None and step.decision is not None:
            every = await runtime.pending(ctx.tenant, status=None)
            for item in (i for i in every if i.call_id == step.call):
                resolved = await runtime.resolve(ctx.tenant, item.id, step.decision)
                if resolved.run is not None:  # (its client waits for it, as the step does)
                    await asyncio.wait_for(resolved.run.wait(), SAFETY)
        await decide_open(ctx, decisions)
    clock.now += 3600  # a lease later
    violations: list[str] = []
    for _ in range(4):
        await decide_open(ctx, decisions)
        try:
            live = await runtime.send(ctx.tenant, "payer", SESSION, "continue")
        except SessionBusy as exc:
            violations.append(f"P4: the next message is refused: {exc}")
            break
        done = await asyncio.wait_for(live.wait(), SAFETY)
        if done is None or done.stop_reason != "paused":
            break
    if ctx.deliverer is not None:
        for _ in range(6):
            clock.now += 120  # (past any hold a dead worker kept)
            await ctx.deliverer.tick()
    return violations


async def decide_open(ctx: Ctx, decisions: dict[str, Any]) -> None:
    for item in await ctx.runtime.pending(ctx.tenant):
        decision = decisions.get(item.call_id)
        if decision is None:
            decision = Approval.approve(by="recovery")
        resolved = await ctx.runtime.resolve(ctx.tenant, item.id, decision)
        if resolved.run is not None:
            await asyncio.wait_for(resolved.run.wait(), SAFETY)


async def thaw(
    a: Process, a_ctx: Ctx, b_ctx: Ctx, real: EventLog, decisions: dict[str, Any]
) -> list[str]:
    """Let a frozen A go on; what it does then must be refused, and must not make the log lie."""
    before = await everything(real, b_ctx.tenant)
    since = len(b_ctx.ledger.entries)
    a.thaw()
    if a_ctx.prompt is not None and not a_ctx.prompt.done():  # (its person answers it now)
        a_ctx.prompt.set_result(Approval.approve(by="prompt"))
    token = CURRENT.set(a)
    try:
        for live in list(a_ctx.runtime.live._runs.values()):
            await asyncio.wait_for(live.finished.wait(), SAFETY)
        await a_ctx.runtime.close()
    finally:
        CURRENT.reset(token)
    if a.claimed_late():  # (a run of its own, begun after B's: its items are decided as any)
        await decide_open(b_ctx, decisions)
        for _ in range(6 if b_ctx.deliverer is not None else 0):
            await b_ctx.deliverer.tick()
    violations = [
        f"P2: a writer that lost its lease had its {w.method} taken ({w.name('after')})"
        for w in a.refused_late()
    ]
    after = await everything(real, b_ctx.tenant)
    for key, stored in after.items() if not a.claimed_late() else ():
        late = [s.event.type for s in stored[len(before.get(key, [])) :]]
        if late:
            violations.append(f"P2: {key.id} got {late} from a writer that lost its lease")
    said = outputs(after)
    for process, what in b_ctx.ledger.entries[since:]:
        call = what.removeprefix("tool ")
        if process == "A" and said.get(call) == INTERRUPTED:
            violations.append(
                f"P3: the log says {call} did not complete, and it ran after the takeover"
            )
    return violations


async def everything(log: EventLog, tenant: str) -> dict[Any, list[Any]]:
    return {r.key: await log.read(r.key) for r in (await log.sessions(tenant, limit=1000)).items}


def outputs(logs: dict[Any, list[Any]]) -> dict[str, str]:
    return {
        s.event.id: s.event.content
        for stored in logs.values()
        for s in stored
        if isinstance(s.event, ev.ToolOutput)
    }


async def check(scenario: Scenario, ctx: Ctx, log: EventLog) -> list[str]:
    logs = await everything(log, ctx.tenant)
    events = [s.event for stored in logs.values() for s in stored]
    out: list[str] = []
    for key, stored in logs.items():  # P2
        if [s.seq for s in stored] != list(range(1, len(stored) + 1)):
            out.append(f"P2: {key.id}'s seqs have a gap: {[s.seq for s in stored]}")
    items = {i.id: i for i in await ctx.runtime.pending(ctx.tenant, status=None)}
    inputs = [e.message.content for e in events if isinstance(e, ev.InputReceived)]
    queued = [e.text for e in events if isinstance(e, ev.SteeringQueued)]
    queued += [e.message.content for e in events if isinstance(e, ev.SteeringInjected)]
    customs = [e.message.content for e in events if isinstance(e, ev.MessageCustom)]
    for ack in ctx.acks:  # P1
        if ack.kind == "custom" and ack.value not in customs:
            out.append(f"P1: the acknowledged custom message {ack.value!r} is not in the log")
        if ack.kind == "input" and ack.value not in inputs:
            out.append(f"P1: the acknowledged input {ack.value!r} is not in the log")
        if ack.kind in ("steer", "follow_up") and ack.value not in queued:
            out.append(f"P1: the acknowledged {ack.kind} {ack.value!r} is not in the log")
        aborted = any(isinstance(e, ev.Done) and e.stop_reason == "aborted" for e in events)
        if ack.kind == "cancel" and ack.value and not aborted:
            out.append("P1: an acknowledged cancel ended no run")
        if ack.kind == "decision" and ack.item is not None:
            status = items[ack.item].status
            if status not in ("approved", "answered", "denied"):
                out.append(f"P1: an acknowledged decision on {ack.item} is {status}")
    ran = Counter(what.removeprefix("tool ") for _, what in ctx.ledger.entries if "tool " in what)
    out += [f"P3: {call} ran {n} times" for call, n in ran.items() if n > 1]
    started = Counter(e.id for e in events if isinstance(e, ev.ToolStarted))
    intents, results = per_call(logs, ev.ToolStarted), per_call(logs, ev.ToolResult)
    for call in intents:  # P3: each intent has exactly one result
        if results[call] != 1:
            out.append(f"P3: {call[2]} was started and has {results[call]} results")
    said = outputs(logs)
    for item in items.values():  # P4
        call = item.call_id
        if item.status == "open":
            out.append(f"P4: {call}'s item is still open after every item listed was decided")
        elif item.status in ("approved", "answered"):
            stopped = said.get(call) in (INTERRUPTED, MAY_HAVE_RUN)  # (P3: surfaced, not re-run)
            if ran[call] == 0 and not (started[call] and stopped):
                if item.kind != "question":
                    out.append(f"P4: {call} was {item.status} and never ran")
                elif call not in said:
                    out.append(f"P4: {call} was answered and the answer never reached the run")
        elif ran[call]:
            out.append(f"P4: {call} was {item.status} and ran")
    out += keys_kept(logs, ctx.ledger)
    out += transformed_kept(logs)
    out += handed_off(logs)
    out += await blobs_kept(logs, log)
    if scenario.outbox:  # P1 for notifications
        sent = {what for _, what in ctx.ledger.entries if what.startswith("webhook ")}
        for item in items.values():
            for event in ("pending", "resolved") if item.status != "open" else ("pending",):
                if f"webhook {event} {item.id}" not in sent:
                    out.append(f"P1: the {event} notice of {item.call_id} was never delivered")
    return out


async def blobs_kept(logs: dict[Any, list[Any]], log: EventLog) -> list[str]:
    """P1 for large results: every stored result a committed `tool:output` names is in the
    attachment table (committed with it), whole."""
    stored = [
        s.event.stored for v in logs.values() for s in v if isinstance(s.event, ev.ToolOutput)
    ]
    named = [a for a in stored if a is not None]
    held = await log.attachments([a.sha256 for a in named]) if named else {}
    return [
        f"P1: the stored result {a.sha256[:12]} is named but not held whole"
        for a in named
        if len(held.get(a.sha256, b"")) != a.size
    ]


def transformed_kept(logs: dict[Any, list[Any]]) -> list[str]:
    """P1 for a reply a hook changed: its audit is logged with it (right before it), and the
    run, live or recovered, acts on the changed reply only (`fix k`'s call gets 7, never 2)."""
    out: list[str] = []
    for key, stored in logs.items():
        for s, after in zip(stored, [*stored[1:], None], strict=False):
            if isinstance(s.event, ev.ReplyTransformed) and not (
                after is not None and isinstance(after.event, ev.MessageCompleted)
            ):
                out.append(f"P1: {key.id}'s reply:transformed at {s.seq} is not its reply's")
            started = s.event if isinstance(s.event, ev.ToolStarted) else None
            if started and started.id.startswith("fix-") and started.args != {"n": 7}:
                out.append(f"P1: {started.id} started with {started.args}, not the changed")
    return out


def handed_off(logs: dict[Any, list[Any]]) -> list[str]:
    """A handoff survives every crash: a logged transfer call (the idempotent transfer tool
    runs again when a crash cut it short) ends with the session's active agent `clerk` (its
    state, folded from the log, says so), handed off once per call, and every reply after the
    handoff is the clerk's (a session resumed after a crash between the handoff and the next
    step is with the target)."""
    out: list[str] = []
    for key, stored in logs.items():
        events = [s.event for s in stored]
        moves = [e.call_id for e in events if isinstance(e, ev.AgentHandoff)]
        if len(set(moves)) != len(moves):
            out.append(f"P1: {key.id} handed off twice for one call: {moves}")
        called = [e for e in events if isinstance(e, ev.MessageCompleted)]
        if not any(c.name == "transfer_to_clerk" for e in called for c in e.message.tool_calls):
            continue
        if fold(events, {}).agent != "clerk":
            out.append(f"P1: {key.id}'s logged transfer left it with payer")
        at = next((i for i, e in enumerate(events) if e.type == "agent:handoff"), len(events))
        after = events[at:]
        texts = [e.message.text for e in after if isinstance(e, ev.MessageCompleted)]
        if not texts or any(t != CLERK for t in texts):
            out.append(f"P1: after the handoff {key.id}'s replies are {texts}, not the clerk's")
    return out


def per_call(logs: dict[Any, list[Any]], kind: type) -> Counter[tuple[str, int, str]]:
    """The events of `kind` by call: (session, its reply's ordinal, call id); a call id may be
    used again in a later reply."""
    found: Counter[tuple[str, int, str]] = Counter()
    for key, stored in logs.items():
        replies = 0
        for s in stored:
            if isinstance(s.event, ev.MessageCompleted):
                replies += 1
            elif isinstance(s.event, kind):
                found[(key.id, replies, s.event.id)] += 1
    return found


def keys_kept(logs: dict[Any, list[Any]], ledger: Ledger) -> list[str]:
    """P3 with idempotency keys: every call the model made (a session's n-th reply's call id)
    is logged started with one key, another for each call; each attempt of a call in the ledger
    carried the key logged for it, so the bank books it at most once."""
    out: list[str] = []
    keys: dict[tuple[Any, int, str], set[str | None]] = {}
    for key, stored in logs.items():
        replies = 0
        for s in stored:
            if isinstance(s.event, ev.MessageCompleted):
                replies += 1
            elif isinstance(s.event, ev.ToolStarted):
                keys.setdefault((key.id, replies, s.event.id), set()).add(s.event.idempotency_key)
    owner: dict[str | None, tuple[Any, int, str]] = {}
    for call, seen in keys.items():
        if len(seen) != 1 or None in seen:
            out.append(f"P3: the call {call} was started with keys {sorted(map(str, seen))}")
        for k in seen:
            if owner.setdefault(k, call) != call:
                out.append(f"P3: the calls {owner[k]} and {call} share the key {k}")
    for _, what in ledger.entries:
        if what.startswith("attempt "):
            _, call_id, k = what.split(" ")
            if k not in owner or owner[k][2] != call_id:
                out.append(f"P3: {call_id} ran with the key {k}, which its start did not log")
    return out
