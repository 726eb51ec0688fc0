"""Every event in its place (issue 14, item 9), checked as pi-agent-core's invariants are: the
checker rejects each ordering the loop used to produce, and the real loop produces the new one.

- steering enters between steps: after `step:finished`, after a reply without tools as after
  a batch;
- every step that started finishes, also one an error or a cancel cut short;
- at `message:completed` the session's messages already hold the reply;
- what a tool reports through a `ToolContext` it kept, once its result is out, is dropped (and
  logged), never streamed after its `tool:result`;
- a follow-up waits until the run would stop: never injected with steering;
- a batch whose every call says `terminate` stops the run as a reply without tools does: what is
  queued (steering, then follow-ups) is delivered in this run, not left to the next one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from conftest import call, drive, scripted, verify
from loopwright import Agent, Hooks, Session, tool
from loopwright import events as ev
from loopwright.messages import AssistantMessage, Text, ToolCall, UserMessage
from loopwright.testing import check_events, types
from loopwright.tools import ToolContext, ToolReturn

# ---- the checker rejects each old ordering ------------------------------------------------------

HI = UserMessage(content="hi")
ANSWER = AssistantMessage(parts=(Text(text="a"),))
CALL = ToolCall(id="c1", name="echo", args={})
WITH_CALL = AssistantMessage(parts=(CALL,))


def steered(mode: str = "steer", text: str = "more") -> ev.SteeringInjected:
    return ev.SteeringInjected(message=UserMessage(content=text), mode=mode)  # type: ignore[arg-type]


def stream(*middle: ev.Event, terminal: ev.Event | None = None) -> list[ev.Event]:
    end = terminal or ev.LoopDone(text="a")
    reason = {"loop:done": "completed", "loop:error": "error", "loop:aborted": "aborted"}
    done = ev.Done(text="a", stop_reason=reason[end.type])  # type: ignore[arg-type]
    return [ev.Session(session_id="s"), ev.InputReceived(message=HI), *middle, end, done]


def step(n: int, reply: AssistantMessage = ANSWER) -> list[ev.Event]:
    return [ev.StepStarted(step=n), ev.MessageCompleted(message=reply)]


BATCH: list[ev.Event] = [
    ev.ActauthDecision(tool="echo", decision="allow", reason="ok"),
    ev.ToolStarted(id="c1", tool="echo", args={}, detail_text=""),
    ev.ToollaneResult(name="echo", summary="x"),
    ev.ToolOutput(id="c1", tool="echo", content="x"),
    ev.ToolResult(id="c1", tool="echo", args={}, detail_text="", status_text="Approved."),
]


def test_the_new_orders_pass():
    check_events(
        stream(*step(1), ev.StepFinished(step=1), steered(), *step(2), ev.StepFinished(step=2))
    )
    failed = ev.LoopError(error="boom")
    check_events(stream(ev.StepStarted(step=1), ev.StepFinished(step=1), terminal=failed))
    ran = [*step(1, WITH_CALL), *BATCH, ev.StepFinished(step=1)]
    check_events(stream(*ran, steered("follow_up"), *step(2), ev.StepFinished(step=2)))


def test_steering_before_step_finished_is_rejected():
    old = stream(*step(1), steered(), ev.StepFinished(step=1), *step(2), ev.StepFinished(step=2))
    with pytest.raises(AssertionError, match="event #4 steering:injected: input enters between"):
        check_events(old)


@pytest.mark.parametrize(
    "terminal", [ev.LoopError(error="boom"), ev.LoopAborted(reason="cancelled")]
)
def test_a_step_that_never_finishes_is_rejected(terminal: ev.Event):
    old = stream(
        ev.StepStarted(step=1),
        ev.BudgetCheck(action="ok", used_tokens=1, budget_tokens=9, ratio=0.1),
        terminal=terminal,
    )
    with pytest.raises(AssertionError, match=f"event #4 {terminal.type}: every step that started"):
        check_events(old)


def test_progress_after_the_result_is_rejected():
    late = ev.ToolUpdate(id="c1", tool="echo", message="late")
    old = stream(
        *step(1, WITH_CALL),
        *BATCH,
        late,
        ev.StepFinished(step=1),
        *step(2),
        ev.StepFinished(step=2),
    )
    with pytest.raises(AssertionError, match="event #9 tool:update: update for c1 outside its run"):
        check_events(old)


def test_a_follow_up_with_steering_is_rejected():
    both = [steered("steer"), steered("follow_up", "later")]
    old = stream(*step(1), ev.StepFinished(step=1), *both, *step(2), ev.StepFinished(step=2))
    with pytest.raises(AssertionError, match="event #6 steering:injected: a follow-up waits"):
        check_events(old)
    # one at each boundary is the order
    apart = [*both[:1], *step(2), ev.StepFinished(step=2), *both[1:], *step(3)]
    check_events(stream(*step(1), ev.StepFinished(step=1), *apart, ev.StepFinished(step=3)))


# ---- the real loop gives the new order ----------------------------------------------------------


def users(model: Any, index: int) -> list[str]:
    return [m.content for m in model.requests[index].messages if isinstance(m, UserMessage)]


def injected(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.mode, e.message.content) for e in events if e.type == "steering:injected"]


def queuing(model: Any, first: str, steer: str | None, follow_up: str | None) -> Session:
    """A session whose `after_reply` hook queues steering and a follow-up on the reply `first`
    (in the run's own task, while its step is still open)."""
    sessions: list[Session] = []

    def queue(info: Any, reply: AssistantMessage) -> None:
        if reply.text == first:
            if steer is not None:
                sessions[0].steer(steer)
            if follow_up is not None:
                sessions[0].follow_up(follow_up)

    sessions.append(Session(Agent(model=model, hooks=Hooks(after_reply=queue))))
    return sessions[0]


ONE_STEP = ["step:started", "budget:check", "text:delta", "message:completed", "step:finished"]


async def test_steering_after_a_reply_without_tools_comes_after_its_step():
    model = scripted("a", "b")
    result = await drive(queuing(model, "a", "more", None).run("hi"))
    assert types(result.events) == [
        "session",
        "input:received",
        *ONE_STEP,
        "steering:injected",
        *ONE_STEP,
        "loop:done",
        "done",
    ]
    assert users(model, 1) == ["hi", "more"]


async def test_a_follow_up_queued_with_steering_waits_until_the_run_would_stop():
    model = scripted("a", "b", "c")
    result = await drive(queuing(model, "a", "steer", "follow").run("hi"))
    assert types(result.events) == [
        "session",
        "input:received",
        *ONE_STEP,
        "steering:injected",
        *ONE_STEP,
        "steering:injected",
        *ONE_STEP,
        "loop:done",
        "done",
    ]
    assert injected(result.events) == [("steer", "steer"), ("follow_up", "follow")]
    assert [users(model, i) for i in range(3)] == [
        ["hi"],
        ["hi", "steer"],
        ["hi", "steer", "follow"],
    ]


async def test_a_step_a_model_failure_ends_finishes():
    result = await drive(Session(Agent(model=scripted({"fail": "boom"}))).run("hi"))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "step:finished",
        "loop:error",
        "done",
    ]
    assert result.events[-3] == ev.StepFinished(step=1)


async def test_a_step_a_cancel_ends_during_its_tools_finishes_with_the_reply_usage():
    @tool
    async def hang() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "never"

    session = Session(Agent(model=scripted({"tool_calls": [call("hang")]}), tools=[hang]))
    events = []
    async for event in session.run("hi"):
        events.append(event)
        if event.type == "tool:started":
            session.cancel()
    verify(events)
    assert types(events)[-6:] == [
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]
    reply = next(e for e in events if e.type == "message:completed").message
    assert reply.usage is not None
    assert events[-3] == ev.StepFinished(step=1, usage=reply.usage)


async def test_at_message_completed_the_session_holds_the_reply():
    opened = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits until the reader saw the reply."""
        await opened.wait()
        return "ok"

    session = Session(Agent(model=scripted({"tool_calls": [call("wait")]}, "done"), tools=[wait]))
    seen = []
    async for event in session.run("hi"):
        if event.type == "message:completed":
            seen.append(session.messages[-1] == event.message)
            opened.set()  # the loop waits in the tool until now: the history is still as it was
    assert seen == [True, True]


async def test_progress_through_a_kept_context_after_the_result_is_dropped_and_logged(
    caplog: pytest.LogCaptureFixture,
):
    kept: list[ToolContext] = []
    release = asyncio.Event()

    @tool
    async def keep(ctx: ToolContext) -> str:
        """Keeps its context."""
        kept.append(ctx)
        return "kept"

    @tool
    async def slow(ctx: ToolContext) -> str:
        """Runs until released."""
        await release.wait()
        ctx.progress("almost")
        return "slow"

    model = scripted({"tool_calls": [call("keep", "k"), call("slow", "s")]}, "done")
    session = Session(Agent(model=model, tools=[keep, slow]))
    caplog.set_level(logging.WARNING, logger="loopwright.tools")
    events = []
    async for event in session.run("hi"):
        events.append(event)
        if event.type == "tool:result" and event.id == "k":
            kept[0].progress("after my result")  # `slow` still runs: the batch is open
            release.set()
    verify(events)
    assert [(e.id, e.message) for e in events if e.type == "tool:update"] == [("s", "almost")]
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "loopwright.tools",
            "WARNING",
            "tool keep (call k) reported tool:update after its result; dropped",
        )
    ]


async def test_terminate_delivers_what_is_queued_in_its_run():
    sessions: list[Session] = []

    @tool
    async def finish(then: bool) -> ToolReturn:
        """Ends the run."""
        if then:
            sessions[0].steer("one more thing")
            sessions[0].follow_up("and then this")
        return ToolReturn(content="bye", terminate=True)

    model = scripted(
        {"tool_calls": [call("finish", then=True)]},
        "noted",
        "also noted",
        {"tool_calls": [call("finish", "f2", then=False)]},
    )
    sessions.append(Session(Agent(model=model, tools=[finish])))
    result = await drive(sessions[0].run("hi"))
    assert types(result.events)[-15:] == [
        "step:finished",
        "steering:injected",
        *ONE_STEP,
        "steering:injected",
        *ONE_STEP,
        "loop:done",
        "done",
    ]
    assert injected(result.events) == [("steer", "one more thing"), ("follow_up", "and then this")]
    assert (result.stop_reason, result.text) == ("completed", "also noted")
    # nothing is left for the next run, which a lone terminating batch ends
    ended = await drive(sessions[0].run("again"))
    assert injected(ended.events) == []
    assert types(ended.events)[-3:] == ["step:finished", "loop:terminated", "done"]
    assert (ended.stop_reason, ended.text) == ("terminated", "bye")
