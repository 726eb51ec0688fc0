"""Steering, follow-up, cancellation with carry-over, hooks, and one run per session."""

from __future__ import annotations

import asyncio

import pytest

from conftest import call, drive, run_agent, scripted, verify
from loopwright import Agent, Block, Hooks, Session, SessionBusy, Stop, tool
from loopwright.messages import ToolResultMessage, UserMessage
from loopwright.testing import types
from loopwright.tools import Outcome
from virtual_time import virtual

gate = asyncio.Event()


def reset_gate() -> None:
    """A fresh event per test: an asyncio.Event binds to the first loop that waits on it."""
    global gate
    gate = asyncio.Event()


@tool
async def wait_for_gate() -> str:
    """Waits until the test opens the gate (or a minute: a safety net, never reached)."""
    await asyncio.wait_for(gate.wait(), 60)
    return "opened"


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def users(model, index):
    return [m.content for m in model.requests[index].messages if isinstance(m, UserMessage)]


async def test_steering_arrives_after_the_running_batch():
    reset_gate()
    model = scripted({"tool_calls": [call("wait_for_gate")]}, "noted")
    session = Session(Agent(model=model, tools=[wait_for_gate]))
    run = session.run("start")
    events = []
    async for event in run:
        events.append(event)
        if event.type == "tool:started":
            session.steer("also check B")
            session.steer("and C")
            gate.set()
    from conftest import verify

    verify(events)
    names = types(events)
    assert names[names.index("tool:result") + 1 : names.index("tool:result") + 3] == [
        "step:finished",
        "steering:injected",
    ]
    assert users(model, 1) == ["start", "also check B"]  # one at a time by default
    assert users(model, 2) == ["start", "also check B", "and C"]  # delivered before stopping


async def test_steering_all_mode_delivers_everything_at_once():
    model = scripted("first", "second")
    session = Session(Agent(model=model, steering="all"))
    session.steer("one")
    session.steer("two")
    await drive(session.run("hi"))
    assert users(model, 0) == ["hi", "one", "two"]


async def test_follow_up_waits_until_the_run_would_stop():
    model = scripted(
        {"tool_calls": [call("echo", text="x")]}, "first answer", "second answer", "third answer"
    )
    session = Session(Agent(model=model, tools=[echo]))
    session.follow_up("more please")
    session.follow_up("and more")
    result = await drive(session.run("hi"))
    assert users(model, 1) == ["hi"]
    assert users(model, 2) == ["hi", "more please"]
    assert users(model, 3) == ["hi", "more please", "and more"]
    assert result.text == "third answer"
    injected = [(e.mode, e.message.content) for e in result.events if e.type == "steering:injected"]
    assert injected == [("follow_up", "more please"), ("follow_up", "and more")]


async def test_follow_up_all_mode():
    model = scripted("a", "b")
    session = Session(Agent(model=model, follow_up="all"))
    session.follow_up("x")
    session.follow_up("y")
    result = await drive(session.run("hi"))
    assert users(model, 1) == ["hi", "x", "y"] and result.text == "b"


async def test_cancel_during_a_tool_interrupts_it_and_keeps_history_valid():
    reset_gate()
    model = scripted(
        {"tool_calls": [call("wait_for_gate", "g"), call("echo", "e", text="hi")]}, "after"
    )
    session = Session(Agent(model=model, tools=[wait_for_gate, echo]))
    run = session.run("go")
    events = []
    async for event in run:
        events.append(event)
        if event.type == "tool:output" and event.id == "e":
            session.steer("dropped on cancel")
            session.cancel()
    from conftest import verify

    verify(events)
    assert types(events)[-6:] == [
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]
    results = [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert [(m.call_id, m.content) for m in results] == [
        ("g", "[cancelled: the call was stopped while it ran; it may have done part of its work]"),
        ("e", "hi"),
    ]
    result = await drive(session.run("again"))
    assert result.text == "after"
    assert users(model, 1) == ["go", "again"]


@virtual  # (a delay of the reply ends only when nothing else can run)
async def test_cancel_while_streaming_carries_the_partial_reply_over():
    model = scripted(
        {"text": "A long answer that streams slowly", "chunk": 4, "delay": 0.01}, "fresh answer"
    )
    session = Session(Agent(model=model))
    events = []
    async for event in session.run("tell me"):
        events.append(event)
        if event.type == "text:delta" and len(events) > 6:
            session.cancel()
    from conftest import verify

    verify(events)
    aborted = events[-2]
    assert aborted.type == "loop:aborted"
    streamed = "".join(e.delta for e in events if e.type == "text:delta")
    assert aborted.carry_over == streamed and streamed
    assert events[-1].stop_reason == "aborted"
    await drive(session.run("again"))
    assert users(model, 1) == [
        "tell me",
        f"[Your previous reply was interrupted. What you had written so far:]\n{streamed}",
        "again",
    ]


@virtual  # (a delay of the reply ends only when nothing else can run)
async def test_leaving_the_iterator_early_cancels_the_run():
    model = scripted({"text": "slow", "chunk": 1, "delay": 0.05})
    session = Session(Agent(model=model))
    seen = []
    async with session.run("hi") as run:
        async for event in run:
            seen.append(event)
            if event.type == "text:delta":
                break
    assert not session.busy and run.finished
    assert model.requests and seen[-1].type == "text:delta"


@virtual  # (a delay of the reply ends only when nothing else can run)
async def test_a_second_run_on_a_busy_session_fails_fast():
    model = scripted({"text": "slow", "delay": 0.05}, "x")
    session = Session(Agent(model=model))
    run = session.run("hi")
    await run.__anext__()
    with pytest.raises(SessionBusy):
        session.run("again")
    await run.result()


async def test_hooks_observe_and_transform():
    log = []

    def before_tool(info, c):
        return Block("not today") if c.id == "blocked" else {"text": c.args["text"].upper()}

    hooks = Hooks(
        on_run_start=lambda info: log.append(("start", info.session_id)),
        on_run_end=lambda info, reason: log.append(("end", reason)),
        on_prompt=lambda info, text: "(context: VIP customer)",
        before_request=lambda info, req: None,
        after_reply=lambda info, reply: log.append(("reply", reply.text)),
        before_tool=before_tool,
        after_tool=lambda info, c, out: Outcome(content=out.content + "!"),
    )
    model = scripted(
        {"tool_calls": [call("echo", "ok", text="hi"), call("echo", "blocked", text="no")]}, "fin"
    )
    session = Session(Agent(model=model, tools=[echo], hooks=hooks), session_id="s")
    await drive(session.run("hello"))
    assert users(model, 0) == ["hello\n\n(context: VIP customer)"]
    assert [
        (m.call_id, m.content, m.is_error)
        for m in model.requests[1].messages
        if isinstance(m, ToolResultMessage)
    ] == [("ok", "HI!", False), ("blocked", "Blocked: not today", True)]
    assert log == [("start", "s"), ("reply", ""), ("reply", "fin"), ("end", "completed")]


async def test_prompt_hook_can_block_the_input():
    model = scripted("never")
    hooks = Hooks(on_prompt=lambda info, text: Block("no secrets"))
    result = await run_agent(Agent(model=model, hooks=hooks), "my password is hunter2")
    assert types(result.events) == ["session", "loop:terminated", "done"]
    assert model.requests == []


async def test_before_request_can_replace_the_request():
    from dataclasses import replace

    model, other = scripted("ok"), scripted("from the other model")
    hooks = Hooks(before_request=lambda info, req: replace(req, system="You are terse."))
    await run_agent(Agent(model=model, instructions="You are chatty.", hooks=hooks))
    assert model.requests[0].system == "You are terse."
    switch = Hooks(before_request=lambda info, req: replace(req, model=other))
    result = await run_agent(Agent(model=scripted(), hooks=switch))
    assert result.text == "from the other model"


async def test_continuation_hook_can_stop_and_stop_policy_can_go_on():
    model = scripted({"tool_calls": [call("echo", text="x")]}, "unused")
    hooks = Hooks(continuation=lambda info, reply: Stop("enough"))
    result = await run_agent(Agent(model=model, tools=[echo], hooks=hooks))
    assert (result.stop_reason, result.text) == ("terminated", "enough")

    model2 = scripted("draft", "final")
    replies = iter(["please double-check", None])
    hooks2 = Hooks(on_stop=lambda info, text: next(replies))
    result2 = await run_agent(Agent(model=model2, hooks=hooks2))
    assert result2.text == "final"
    assert users(model2, 1) == ["go", "please double-check"]


async def test_a_raising_hook_ends_the_run_with_error_and_every_call_gets_a_result():
    def explode(info, c, out):
        raise RuntimeError("hook bug")

    model = scripted({"tool_calls": [call("echo", "a", text="1"), call("echo", "b", text="2")]})
    session = Session(Agent(model=model, tools=[echo], hooks=Hooks(after_tool=explode)))
    result = await drive(session.run("go"))
    assert result.stop_reason == "error"
    assert "hook bug" in result.events[-2].error
    ids = [m.call_id for m in session.messages if isinstance(m, ToolResultMessage)]
    assert ids == ["a", "b"]


async def test_a_raising_before_tool_hook_mid_batch_leaves_no_call_without_result():
    def explode(info, c):
        if c.id == "b":
            raise RuntimeError("nope")

    model = scripted({"tool_calls": [call("echo", "a", text="1"), call("echo", "b", text="2")]})
    session = Session(Agent(model=model, tools=[echo], hooks=Hooks(before_tool=explode)))
    result = await drive(session.run("go"))
    assert result.events[-2].error == "RuntimeError: nope"
    contents = [
        (m.call_id, m.content) for m in session.messages if isinstance(m, ToolResultMessage)
    ]
    assert contents == [
        ("a", "[interrupted: tool call did not complete]"),
        ("b", "[interrupted: tool call did not complete]"),
    ]


def test_run_sync_for_scripts():
    from loopwright import run_sync

    result = run_sync(Agent(model=scripted("hi there")), "hello")
    assert (result.text, result.stop_reason) == ("hi there", "completed")


async def test_cancel_while_a_human_is_deciding_closes_the_approval():
    from loopwright import Approval, Rules

    deciding, never = asyncio.Event(), asyncio.Event()

    async def slow_human(request):
        deciding.set()
        await never.wait()
        return Approval.approve()

    rules = Rules.from_yaml("rules: [{name: ask-echo, tool: echo, decision: ask}]")
    model = scripted({"tool_calls": [call("echo", "e", text="x")]})
    session = Session(Agent(model=model, tools=[echo], rules=rules))
    run = session.run("go", approver=slow_human)

    async def cancel_while_deciding():
        await deciding.wait()
        session.cancel()

    canceller = asyncio.create_task(cancel_while_deciding())
    events = [event async for event in run]
    await canceller
    from conftest import verify

    verify(events)
    assert types(events)[-9:] == [
        "approval:pending",
        "pending:requested",
        "actauth:decision",
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]
    assert events[-7].reason == "matched rule 'ask-echo' — run ended before a decision"


async def test_the_journal_sees_every_event_and_the_intent_before_the_tool_runs():
    class Journal:
        def __init__(self):
            self.events = []

        async def begin(self, session, input):
            self.events.append((session.id, "begin"))

        async def end(self, session, stop_reason):
            self.events.append((session.id, f"end {stop_reason}"))

        def seq_of(self, event):
            return None

        async def append(self, session_id, event):
            await asyncio.sleep(0)
            self.events.append((session_id, event.type))

    journal = Journal()
    seen_by_tool = []

    @tool
    def effect() -> str:
        """Records what the journal held when it ran."""
        seen_by_tool.append([t for _, t in journal.events])
        return "done"

    model = scripted({"tool_calls": [call("effect")]}, "ok")
    session = Session(Agent(model=model, tools=[effect]), session_id="j1", journal=journal)
    result = await drive(session.run("go"))
    assert journal.events == [
        ("j1", "begin"),
        *[("j1", e.type) for e in result.events],
        ("j1", "end completed"),
    ]
    assert seen_by_tool[0][-1] == "tool:started"


async def test_cancel_from_another_task_while_a_journal_is_writing():
    reset_gate()
    writing, written = asyncio.Event(), asyncio.Event()

    class SlowJournal:
        async def begin(self, session, input):
            pass

        async def end(self, session, stop_reason):
            pass

        def seq_of(self, event):
            return None

        async def append(self, session_id, event):
            if event.type == "tool:started":  # held until the other task has cancelled
                writing.set()
                await written.wait()

    model = scripted({"tool_calls": [call("wait_for_gate")]}, "never")
    session = Session(Agent(model=model, tools=[wait_for_gate]), journal=SlowJournal())
    run = session.run("go")

    async def cancel_while_writing():
        await writing.wait()
        session.cancel()
        written.set()

    canceller = asyncio.create_task(cancel_while_writing())
    result = await drive(run)
    await canceller
    assert result.stop_reason == "aborted"
    assert types(result.events)[-6:] == [
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]


# ---- the per-request deadline (SPEC §3.8) ------------------------------------------------------


# These run on virtual time (tests/virtual_time.py): a stalled model hangs until a deadline
# ends its request, the deadline fires at its exact time, and the times read are exact.


@virtual
async def test_a_request_past_its_deadline_is_retried():
    from loopwright import RetryPolicy

    model = scripted({"stall": 30}, "done")
    agent = Agent(model=model, retry=RetryPolicy(deadline=0.2, backoff=0))
    result = await drive(Session(agent).run("go"))
    assert asyncio.get_running_loop().time() == pytest.approx(0.2)  # not the stall's 30 s
    assert result.text == "done"
    [retry] = [e for e in result.events if e.type == "model:retry"]
    assert (retry.attempt, retry.error) == (1, "no complete reply within 0.2s")


@virtual
async def test_past_the_bound_a_stalled_model_ends_the_run_with_an_error():
    from loopwright import RetryPolicy

    agent = Agent(
        model=scripted({"stall": 30}, {"stall": 30}),
        retry=RetryPolicy(deadline=0.1, backoff=0, attempts=1),
    )
    result = await drive(Session(agent).run("go"))
    assert result.stop_reason == "error"
    assert types(result.events)[-2:] == ["loop:error", "done"]
    assert result.events[-2].error == "model request failed: no complete reply within 0.1s"
    assert asyncio.get_running_loop().time() == pytest.approx(0.2)


@virtual
async def test_a_deadline_that_passes_while_the_caller_holds_an_event_lands_in_the_loop():
    """The caller is slow with a text delta while the deadline passes: its own await is never
    cancelled; the request fails when the loop next waits, and the retry carries the text."""
    from loopwright import RetryPolicy

    loop = asyncio.get_running_loop()
    model = scripted({"text": "abcdef", "chunk": 2, "delay": 0.15}, "done")
    agent = Agent(model=model, retry=RetryPolicy(deadline=0.25, backoff=0))
    events, held = [], []
    async with Session(agent).run("go") as run:
        async for event in run:
            events.append(event)
            if event.type == "text:delta" and len(events) < 10:
                await asyncio.sleep(0.3)  # held past the deadline: must not be cancelled
                held.append(loop.time())
    verify(events)
    # "ab" came at 0.15 and was held 0.3 s in full; the retry's "done" at once, held as long
    assert held == [pytest.approx(0.45), pytest.approx(0.75)]
    assert events[-1].text == "done"
    assert [e.delta for e in events if e.type == "text:delta"] == ["ab", "done"]
    assert [e.error for e in events if e.type == "model:retry"] == [
        "no complete reply within 0.25s"
    ]
    assert model.requests[1].notes == ("[Your previous attempt was cut off after: ab]",)


@virtual
async def test_each_request_of_a_run_is_due_from_its_own_start():
    """One timer a run watches its requests' dues (`retry.Deadline`): armed when the first
    request started, it still times a later one from that one's start; once the run is over,
    no timer of it is left on the loop."""
    from loopwright import RetryPolicy

    @tool
    async def pause() -> str:
        """Takes 0.15 s."""
        await asyncio.sleep(0.15)
        return "paused"

    loop = asyncio.get_running_loop()
    model = scripted({"tool_calls": [call("pause", "p")]}, {"stall": 30}, "done")
    agent = Agent(model=model, tools=[pause], retry=RetryPolicy(deadline=0.2, backoff=0))
    result = await drive(Session(agent).run("go"))
    assert result.text == "done"
    assert loop.time() == pytest.approx(0.35)  # the second request's start (0.15) + 0.2
    [retry] = [e for e in result.events if e.type == "model:retry"]
    assert retry.error == "no complete reply within 0.2s"
    assert [h for h in loop._scheduled if not h.cancelled()] == []  # type: ignore[attr-defined]


@virtual
async def test_runs_on_one_loop_with_different_deadlines_are_each_cut_at_their_own_due():
    """Runs on one loop with different deadlines, one started while the other's request is
    due: each is cut at its own due; once both are over, no timer is left on the loop."""
    from loopwright import RetryPolicy

    loop = asyncio.get_running_loop()
    ended: dict[str, float] = {}

    async def timed(name: str, deadline: float) -> list[str]:
        model = scripted({"stall": 30}, "done")
        agent = Agent(model=model, retry=RetryPolicy(deadline=deadline, backoff=0), name=name)
        result = await drive(Session(agent).run("go"))
        ended[name] = loop.time()
        return [e.error for e in result.events if e.type == "model:retry"]

    slow = asyncio.create_task(timed("slow", 5))
    await asyncio.sleep(0.1)  # its request is in flight: the loop's timer is armed for 5.0
    fast = await timed("fast", 0.2)
    assert fast == ["no complete reply within 0.2s"]
    assert await slow == ["no complete reply within 5s"]
    assert ended == {"fast": pytest.approx(0.3), "slow": pytest.approx(5.0)}
    assert [h for h in loop._scheduled if not h.cancelled()] == []  # type: ignore[attr-defined]


@virtual
async def test_deadlines_bound_each_request_alone():
    """Requests of several runs at once, each with its own deadline; a request that ended in
    time is never cancelled afterwards (its tool runs past the deadline untouched)."""
    from loopwright import RetryPolicy

    @tool
    async def slow_tool() -> str:
        """Takes a while."""
        await asyncio.sleep(0.4)
        return "slow but fine"

    fast = Agent(
        model=scripted({"stall": 30}, "fast retried"),
        retry=RetryPolicy(deadline=0.1, backoff=0),
    )
    later = Agent(
        model=scripted({"stall": 30}, "later retried"),
        retry=RetryPolicy(deadline=0.3, backoff=0),
    )
    tooled = Agent(
        model=scripted({"tool_calls": [call("slow_tool", "t")]}, "tool done"),
        tools=[slow_tool],
        retry=RetryPolicy(deadline=0.2, backoff=0),
    )
    loop = asyncio.get_running_loop()

    async def timed(agent: Agent) -> tuple[str, float]:
        result = await drive(Session(agent).run("go"))
        return result.text, loop.time()

    ended = await asyncio.gather(timed(fast), timed(later), timed(tooled))
    assert ended == [
        ("fast retried", pytest.approx(0.1)),  # its own deadline, not another run's
        ("later retried", pytest.approx(0.3)),
        ("tool done", pytest.approx(0.4)),  # the tool ran 0.4 s past a 0.2 s deadline
    ]
