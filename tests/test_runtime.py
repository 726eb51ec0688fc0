"""The runtime service on a real SQLite log: send, pause, resolve and resume (once, for every
door), decisions that race, subagents, sessions named by (tenant, agent, id), steering."""

from __future__ import annotations

import asyncio

import pytest

from conftest import call, scripted
from loopwright import Agent, Answer, Approval, tool
from loopwright import events as ev
from loopwright.errors import SessionBusy, UnknownPending, UnknownSession
from loopwright.state.compaction import Compaction
from loopwright.store.log import SessionKey
from loopwright.subagents import subagent_tool
from loopwright.testing import FunctionModel
from loopwright.tools import ask_user
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import KEY, RULES, Held, ended, logged, paid, payer, pays

PAUSED_RUN = [
    "session",
    "input:received",
    "step:started",
    "budget:check",
    "message:completed",
    "approval:pending",
    "pending:requested",
    "actauth:decision",
    "step:finished",
    "loop:paused",
    "done",
]
RESUMED_RUN = [
    "session",
    "approval:resolved",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:started",
    "budget:check",
    "message:completed",
    "step:finished",
    "loop:done",
    "done",
]


async def test_a_paused_run_is_resolved_and_resumes_here(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer(*pays(1))}, log)
    first = await runtime.send("acme", "payer", "s1", "go")
    assert (await ended(first)).stop_reason == "paused"
    [item] = await runtime.pending("acme")
    assert (item.status, item.tool, item.args, item.session_id) == ("open", "pay", {"n": 1}, "s1")
    resolved = await runtime.resolve("acme", item.id, Approval.approve({"n": 7}, by="ann"))
    assert (resolved.status, resolved.root, resolved.outstanding) == ("resumed", KEY, [])
    assert (resolved.item.status, resolved.item.decided_by) == ("approved", "ann")
    assert resolved.run is not None
    assert (await ended(resolved.run)).text == "all paid"
    assert paid == [7]
    assert await logged(log, KEY) == [*PAUSED_RUN, "pending:decided", *RESUMED_RUN]
    assert await runtime.pending("acme") == []
    assert (await runtime.session(KEY)).status == "idle"


async def test_resolving_twice_keeps_the_first_decision(logs, runtimes):
    log = await logs()
    runtime = runtimes({"payer": payer(*pays(1))}, log)
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    [item] = await runtime.pending("acme")
    denied = await runtime.resolve("acme", item.id, Approval.deny("no refunds", by="ann"))
    assert denied.status == "resumed" and denied.run is not None
    assert (await ended(denied.run)).stop_reason == "denied"
    again = await runtime.resolve("acme", item.id, Approval.approve(by="bo"))
    assert (again.status, again.run, again.outstanding) == ("already_resolved", None, [])
    assert (again.item.status, again.item.decided_by, again.item.note) == (
        "denied",
        "ann",
        "no refunds",
    )
    assert paid == []
    assert (await logged(log, KEY)).count("session") == 2  # resumed once, not twice


async def test_a_refused_decision_leaves_the_item_open(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    [item] = await runtime.pending("acme")
    bad = await runtime.resolve("acme", item.id, Approval.approve({"n": "lots"}))
    assert bad.status == "invalid" and bad.run is None
    assert bad.error is not None and bad.error.startswith("edited arguments are invalid")
    wrong = await runtime.resolve("acme", item.id, Answer(text="yes"))
    assert (wrong.status, wrong.error) == ("invalid", f"{item.id} is an approval")
    assert [p.id for p in await runtime.pending("acme")] == [item.id]
    with pytest.raises(UnknownPending):
        await runtime.resolve("globex", item.id, Approval.approve())  # another tenant's id


async def test_a_batch_resumes_once_its_last_item_is_decided(logs, runtimes):
    agent = payer({"tool_calls": [call("pay", "p1", n=1), call("pay", "p2", n=2)]}, "both paid")
    runtime = runtimes({"payer": agent}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    first, second = await runtime.pending("acme")
    waiting = await runtime.resolve("acme", first.id, Approval.approve(by="ann"))
    assert (waiting.status, [p.id for p in waiting.outstanding]) == ("waiting", [second.id])
    resumed = await runtime.resolve("acme", second.id, Approval.approve(by="bo"))
    assert resumed.run is not None and (await ended(resumed.run)).text == "both paid"
    assert paid == [1, 2]


async def test_ids_belong_to_tenant_and_agent(logs, runtimes):
    agents = {"payer": payer("one", "two"), "other": payer("three", name="other")}
    runtime = runtimes(agents, await logs())
    keys = [
        SessionKey("acme", "payer", "order-1"),
        SessionKey("acme", "other", "order-1"),
        SessionKey("globex", "payer", "order-1"),
    ]
    for key in keys:
        await ended(await runtime.send(key.tenant, key.agent, key.id, f"hi {key}"))
    for key in keys:
        said = [e async for _, e in runtime.events(key) if e.type == "input:received"]
        assert [e.message.content for e in said] == [f"hi {key}"]
    acme = (await runtime.sessions("acme")).items
    assert {s.key for s in acme} == set(keys[:2])
    assert [s.key for s in (await runtime.sessions("globex")).items] == keys[2:]
    with pytest.raises(UnknownSession):  # a foreign id is an unused one
        await runtime.session(SessionKey("initech", "payer", "order-1"))


async def test_a_decision_made_while_the_run_pauses_resumes_it_once_paused(logs, runtimes):
    looking, finish = asyncio.Event(), asyncio.Event()

    @tool
    async def slow_look(n: int) -> str:
        """Look slowly (until the test lets it finish)."""
        looking.set()
        await finish.wait()
        return f"looked {n}"

    agent = Agent(
        name="payer",
        model=scripted(
            {"tool_calls": [call("pay", "p1", n=1), call("slow_look", "l1", n=2)]}, "done"
        ),
        tools=[*payer().tools, slow_look],
        rules=RULES,
    )
    log = await logs()
    here = runtimes({"payer": agent}, log)
    elsewhere = runtimes({"payer": agent}, await logs())
    live = await here.send("acme", "payer", "s1", "go")
    await looking.wait()
    [item] = await here.pending("acme")  # deferred; the run waits for its sibling to finish
    decided = await elsewhere.resolve("acme", item.id, Approval.approve(by="bo"))
    assert (decided.status, decided.run) == ("resumed", None)  # the run is live here
    finish.set()
    assert (await ended(live)).stop_reason == "paused"
    follow = here.events(KEY, after=0, follow=True)
    seen = [e.type async for _, e in follow]
    assert seen[-2:] == ["loop:done", "done"] and seen.count("session") == 2
    assert paid == [1]


async def test_a_subagents_item_resumes_the_top_level_session(logs, runtimes):
    child = payer(*pays(3, "child paid"), name="billing", description="Pays bills.")
    parent = Agent(
        name="desk",
        model=scripted({"tool_calls": [call("billing", "b1", request="pay it")]}, "all done"),
        tools=[subagent_tool(child)],
    )
    runtime = runtimes({"desk": parent}, await logs())
    first = await runtime.send("acme", "desk", "s1", "go")
    assert (await ended(first)).stop_reason == "paused"
    [item] = await runtime.pending("acme")
    assert (item.agent, item.session_id) == ("billing", "s1/billing/b1")
    assert await runtime.outstanding(SessionKey("acme", "desk", "s1")) == [item]
    assert await runtime.pending("acme", session=SessionKey("acme", "desk", "s1")) == []
    resolved = await runtime.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.root == SessionKey("acme", "desk", "s1") and resolved.run is not None
    assert (await ended(resolved.run)).text == "all done"
    assert paid == [3]
    child_key = SessionKey("acme", "billing", "s1/billing/b1")
    assert (await runtime.session(child_key)).parent == SessionKey("acme", "desk", "s1")


async def test_a_subagents_deltas_are_streamed_not_logged(logs, runtimes):
    """The parent's log keeps a subagent's deltas no more than its own (one row a delta
    otherwise); its live stream shows them."""
    writer = Agent(
        name="writer",
        description="Writes.",
        model=scripted({"text": "a reply of forty characters, in 3 parts", "chunk": 16}),
    )
    desk = Agent(
        name="desk",
        model=scripted({"tool_calls": [call("writer", "w1", request="write")]}, "sent"),
        tools=[subagent_tool(writer)],
    )
    log = await logs()
    runtime = runtimes({"desk": desk}, log)
    live = await runtime.send("acme", "desk", "s1", "go")
    assert (await ended(live)).text == "sent"
    forwarded = [e.event.type for e in live.items if type(e) is ev.SubagentEvent]
    assert forwarded.count("text:delta") == 3
    stored = await log.read(SessionKey("acme", "desk", "s1"))
    kept = [s.event.event.type for s in stored if type(s.event) is ev.SubagentEvent]
    assert kept == [t for t in forwarded if t != "text:delta"] and "done" in kept


async def test_a_question_is_answered(logs, runtimes):
    agent = Agent(
        name="payer",
        model=scripted({"tool_calls": [call("ask_user", "q", question="Why?")]}, "understood"),
        tools=[ask_user],
    )
    runtime = runtimes({"payer": agent}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    [item] = await runtime.pending("acme")
    resolved = await runtime.resolve("acme", item.id, Answer(text="because", by="ann"))
    assert resolved.run is not None and (await ended(resolved.run)).text == "understood"
    assert (resolved.item.status, resolved.item.answer) == ("answered", "because")


async def test_cancelling_a_run_at_its_prompt_closes_the_item(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    asked = asyncio.Event()

    async def prompt(request):
        asked.set()
        await asyncio.Event().wait()  # the person never answers: Ctrl-C

    live = await runtime.send("acme", "payer", "s1", "go", approver=prompt)
    await asked.wait()
    assert runtime.cancel(KEY)
    assert (await ended(live)).stop_reason == "aborted"
    assert await runtime.pending("acme") == []  # closed, never open but unresumable
    [item] = await runtime.pending("acme", status=None)
    assert (item.status, item.decided_by) == ("skipped", "loopwright")
    assert not runtime.cancel(KEY)


async def test_a_prompt_overtaken_by_a_decision_made_elsewhere_closes(logs, runtimes):
    agent = payer(*pays(1))
    log = await logs()
    here = runtimes({"payer": agent}, log)
    elsewhere = runtimes({"payer": agent}, await logs())
    asked, closed = asyncio.Event(), asyncio.Event()

    async def prompt(request):
        asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            closed.set()

    live = await here.send("acme", "payer", "s1", "go", approver=prompt)
    await asked.wait()
    [item] = await here.pending("acme")
    other = await elsewhere.resolve("acme", item.id, Approval.deny("not today", by="bo"))
    assert (other.status, other.run) == ("resumed", None)  # the run waits on it, here
    done = await ended(live)
    assert closed.is_set() and done.stop_reason == "denied" and paid == []
    [resolution] = [e for e in live.items if e.type == "approval:resolved"]
    assert (resolution.decision, resolution.by) == ("deny", "bo")


async def test_a_live_answer_is_recorded_first_and_stands(logs, runtimes):
    runtime = runtimes({"payer": payer(*pays(1))}, await logs())
    live = await runtime.send(
        "acme", "payer", "s1", "go", approver=lambda r: Approval.approve({"n": 4}, by="ann")
    )
    assert (await ended(live)).text == "all paid" and paid == [4]
    [item] = await runtime.pending("acme", status=None)
    assert (item.status, item.decided_by, item.edited_args) == ("approved", "ann", {"n": 4})
    later = await runtime.resolve("acme", item.id, Approval.deny(by="bo"))
    assert (later.status, later.item.decided_by) == ("already_resolved", "ann")


async def test_steering_an_idle_session_reaches_its_next_run(logs, runtimes):
    held = Held()
    agent = Agent(name="payer", model=held.model)
    runtime = runtimes({"payer": agent}, await logs())
    held.give("first")
    await ended(await runtime.send("acme", "payer", "s1", "one"))
    await runtime.steer(KEY, "mind the budget")
    held.give("second")
    live = await runtime.send("acme", "payer", "s1", "two")
    await ended(live)
    kinds = [e.type for e in live.items]
    assert kinds.index("input:received") < kinds.index("steering:injected")
    with pytest.raises(UnknownSession):
        await runtime.steer(SessionKey("acme", "payer", "nope"), "hello?")


async def test_a_running_session_is_busy(logs, runtimes):
    held = Held()
    runtime = runtimes({"payer": Agent(name="payer", model=held.model)}, await logs())
    live = await runtime.send("acme", "payer", "s1", "one")
    with pytest.raises(SessionBusy):
        await runtime.send("acme", "payer", "s1", "two")
    await runtime.steer(KEY, "faster")  # reaches the run in progress: one more step
    held.give("ok")
    held.give("faster it is")
    assert (await ended(live)).text == "faster it is"
    kinds = await logged(runtime.log, KEY)
    assert kinds.index("steering:queued") < kinds.index("steering:injected")


async def test_a_session_whose_run_ended_here_is_kept_for_its_next_message(logs, runtimes):
    def said(request) -> str:  # what the model saw: every user message so far
        return " ".join(m.content for m in request.messages if m.role == "user")

    agent = Agent(name="payer", model=FunctionModel(said))
    here = runtimes({"payer": agent}, await logs())
    elsewhere = runtimes({"payer": agent}, await logs())
    first = await here.send("acme", "payer", "s1", "a")
    await ended(first)
    second = await here.send("acme", "payer", "s1", "b")
    assert (await ended(second)).text == "a b" and second.session is first.session
    await ended(await elsewhere.send("acme", "payer", "s1", "c"))  # another process wrote
    fourth = await here.send("acme", "payer", "s1", "d")
    assert (await ended(fourth)).text == "a b c d"  # so the log was read again
    assert fourth.session is not first.session


async def test_compact_follow_up_and_usage(logs, runtimes):
    held = Held()
    agent = Agent(name="payer", model=held.model, compaction=Compaction(keep_last=2))
    runtime = runtimes({"payer": agent}, await logs())
    held.give({"text": "a", "usage": {"input_tokens": 5, "output_tokens": 1}})  # (1 of 3)
    await ended(await runtime.send("acme", "payer", "s1", "one"))
    live = await runtime.send("acme", "payer", "s1", "two")
    await runtime.follow_up(KEY, "and three")  # delivered when the run would stop
    held.give("b")
    held.give("c")
    assert (await ended(live)).text == "c"
    held.give("summary of it all")
    compacted = await runtime.compact("acme", "payer", "s1")
    assert [e.type for e in (await ended(compacted), compacted.items)[1]] == [
        "session",
        "compaction:started",
        "compaction:finished",
        "loop:done",
        "done",
    ]
    reopened = await runtime.open(KEY)
    assert reopened.messages[0].content.endswith("summary of it all")
    replies = [
        e.message
        for _, e in [p async for p in runtime.events(KEY)]
        if e.type == "message:completed"
    ]
    usage = await runtime.usage("acme")
    assert (usage["requests"], usage["input_tokens"]) == (
        3,
        sum(m.usage.input_tokens for m in replies),
    )
    assert replies[0].usage.input_tokens == 5
    assert await runtime.usage("acme", KEY) == usage


async def test_a_cancelled_parent_closes_the_items_of_its_paused_subagent(logs, runtimes):
    @tool
    async def stall(n: int) -> str:
        """Take forever (until cancelled)."""
        await asyncio.Event().wait()
        return "never"

    child = payer(*pays(3), name="billing", description="Pays bills.")
    parent = Agent(
        name="desk",
        model=scripted(
            {"tool_calls": [call("billing", "b1", request="pay"), call("stall", "s1", n=1)]}
        ),
        tools=[subagent_tool(child), stall],
    )
    runtime = runtimes({"desk": parent}, await logs())
    live = await runtime.send("acme", "desk", "s1", "go")
    async for _, event in live.subscribe(0):  # (watching, not following: nobody to ask)
        if isinstance(event, ev.SubagentEvent) and event.event.type == "done":
            break  # the subagent paused while its sibling runs on
    assert [p.agent for p in await runtime.pending("acme")] == ["billing"]
    assert runtime.cancel(SessionKey("acme", "desk", "s1"))
    done = await live.wait()  # (not `ended`: the core reports the suspended call again on
    # cancel — tool:suspended, then tool:interrupted/output/result for the same call)
    assert done is not None and done.stop_reason == "aborted"
    assert await runtime.pending("acme") == []
    [item] = await runtime.pending("acme", status=None)
    assert (item.agent, item.status, item.decided_by) == ("billing", "skipped", "loopwright")


async def test_resolving_resumes_with_the_callers_approver_or_not_at_all(logs, runtimes):
    agent = payer(*[{"tool_calls": [call("pay", f"p{n}", n=n)]} for n in (1, 2, 3)], "paid")
    runtime = runtimes({"payer": agent}, await logs())
    await ended(await runtime.send("acme", "payer", "s1", "go"))
    [first] = await runtime.pending("acme")
    recorded = await runtime.resolve("acme", first.id, Approval.approve(), resume=False)
    assert (recorded.status, recorded.outstanding, recorded.run) == ("waiting", [], None)
    assert (await runtime.session(KEY)).status == "paused" and paid == []
    again = await ended(await runtime.resume("acme", "payer", "s1"))
    assert again.stop_reason == "paused" and paid == [1]  # the next ask: nobody here
    [second] = await runtime.pending("acme")
    tty = lambda request: Approval.approve(by="tty")  # noqa: E731 (the person, at the prompt)
    resolved = await runtime.resolve("acme", second.id, Approval.approve(), approver=tty)
    assert resolved.run is not None and (await ended(resolved.run)).text == "paid"
    assert paid == [1, 2, 3]
    [third] = [p for p in await runtime.pending("acme", status=None) if p.call_id == "p3"]
    assert third.decided_by == "tty"
