"""Composed hooks (`hook_chain.compose`) through real runs: the order the hooks run in,
transform chains, veto short-circuits and isolated observers, sync and async alike."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Hooks, Session, tool
from loopwright import events as ev
from loopwright.hooks import Block, RunInfo, Stop
from loopwright.loop.hook_chain import compose
from loopwright.messages import ToolCall
from loopwright.models import ModelRequest
from loopwright.testing import types
from loopwright.tools import Outcome

seen: list[Any] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    seen.clear()


@tool
def echo(text: str) -> str:
    """Echo."""
    seen.append(("echo", text))
    return text


def observer(label: str, *, fails: bool = False, is_async: bool = False) -> Any:
    """An observe hook that records its label and the point's first argument after info."""

    def hook(info: RunInfo, *rest: Any) -> None:
        seen.append(label)
        if fails:
            raise RuntimeError(f"{label} broke")

    async def async_hook(info: RunInfo, *rest: Any) -> None:
        hook(info, *rest)

    chosen = async_hook if is_async else hook
    chosen.__qualname__ = f"observer.{label}"
    return chosen


TOOL_STEP = [
    "step:started",
    "budget:check",
    "tool:delta",
    "message:completed",
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
    "step:finished",
]
TEXT_STEP = ["step:started", "budget:check", "text:delta", "message:completed", "step:finished"]


def agent(*hooks: Hooks, replies: tuple[Any, ...] | None = None) -> Agent:
    replies = replies or ({"tool_calls": [call("echo", "c1", text="x")]}, "done")
    return Agent(model=scripted(*replies), tools=[echo], hooks=compose(*hooks))


def test_a_point_one_hook_sets_keeps_that_hook_and_nothing_composes_to_nothing():
    one = observer("a")
    composed = compose(Hooks(on_run_start=one), Hooks(), Hooks(after_reply=one))
    assert composed.on_run_start is one and composed.after_reply is one
    assert composed.on_run_end is None and compose() == Hooks()


async def test_observe_hooks_run_in_the_given_order_sync_and_async():
    points = ("on_run_start", "after_reply", "on_run_end")
    hooks = [
        Hooks(**{p: observer(f"{label}:{p}", is_async=label == "b") for p in points})
        for label in ("a", "b", "agent")
    ]
    result = await drive(Session(agent(*hooks)).run("go"))
    assert (result.stop_reason, result.text) == ("completed", "done")
    order = [f"{label}:{p}" for p in points for label in ("a", "b", "agent")]
    after_reply = order[3:6]
    assert seen == [*order[:3], *after_reply, ("echo", "x"), *after_reply, *order[6:]]
    assert types(result.events) == [
        "session",
        "input:received",
        *TOOL_STEP,
        *TEXT_STEP,
        "loop:done",
        "done",
    ]


async def test_an_observer_that_raises_lets_the_others_run_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")
    hooks = [
        Hooks(on_run_start=observer("a"), on_run_end=observer("a-end", is_async=True)),
        Hooks(on_run_start=observer("b", fails=True), on_run_end=observer("b-end", fails=True)),
        Hooks(on_run_start=observer("c", is_async=True), on_run_end=observer("c-end")),
    ]
    result = await drive(Session(agent(*hooks, replies=("done",))).run("go"))
    assert (result.stop_reason, result.text) == ("completed", "done")
    assert seen == ["a", "b", "c", "a-end", "b-end", "c-end"]
    assert types(result.events) == [
        "session",
        "hook:failed",
        "input:received",
        *TEXT_STEP,
        "hook:failed",
        "loop:done",
        "done",
    ]
    failed = [(e.hook, e.error) for e in result.events if isinstance(e, ev.HookFailed)]
    assert failed == [
        ("on_run_start", "RuntimeError: b broke"),
        ("on_run_end", "RuntimeError: b-end broke"),
    ]
    chain = (
        "loopwright.loop.hook_chain.compose.on_run_start[test_hook_chain.observer.a, "
        "test_hook_chain.observer.b, test_hook_chain.observer.c]"
    )
    logged = [r for r in caplog.records if r.name == "loopwright.hooks"]
    assert logged[0].getMessage() == f"observe hook on_run_start ({chain}) raised; the run goes on"
    assert len(logged) == 2
    exc = logged[0].exc_info[1] if logged[0].exc_info else None
    assert isinstance(exc, RuntimeError) and exc.__notes__ == [
        "(raised by the on_run_start hook test_hook_chain.observer.b, in a composed chain)"
    ]


async def test_several_observers_that_raise_are_one_hook_failed_naming_the_first(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")
    hooks = [
        Hooks(after_reply=observer("a", fails=True, is_async=True)),
        Hooks(after_reply=observer("b")),
        Hooks(after_reply=observer("c", fails=True)),
    ]
    result = await drive(Session(agent(*hooks, replies=("done",))).run("go"))
    assert result.stop_reason == "completed" and seen == ["a", "b", "c"]
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "text:delta",
        "message:completed",
        "hook:failed",
        "step:finished",
        "loop:done",
        "done",
    ]
    [failed] = [e for e in result.events if isinstance(e, ev.HookFailed)]
    assert (failed.hook, failed.error) == ("after_reply", "RuntimeError: a broke")
    [record] = [r for r in caplog.records if r.name == "loopwright.hooks"]
    group = record.exc_info[1] if record.exc_info else None
    assert isinstance(group, ExceptionGroup)
    assert [str(e) for e in group.exceptions] == ["a broke", "c broke"]
    assert "c broke" in caplog.text and "a broke" in caplog.text  # both tracebacks


async def test_before_request_chains_each_hook_gets_the_previous_output():
    def first(info: RunInfo, request: ModelRequest) -> ModelRequest:
        return replace(request, system=request.system + " +first")

    def keeps(info: RunInfo, request: ModelRequest) -> None:
        seen.append(request.system)

    async def second(info: RunInfo, request: ModelRequest) -> ModelRequest:
        return replace(request, system=request.system + " +second")

    model = scripted("done")
    hooks = [Hooks(before_request=h) for h in (first, keeps, second)]
    base = Agent(model=model, instructions="persona", hooks=compose(*hooks))
    result = await drive(Session(base).run("go"))
    assert result.text == "done"
    assert seen == ["persona +first"]
    assert [r.system for r in model.requests] == ["persona +first +second"]


async def test_after_tool_chains_outcomes():
    async def upper(info: RunInfo, call: ToolCall, outcome: Outcome) -> Outcome:
        return replace(outcome, content=outcome.content.upper())

    def tagged(info: RunInfo, call: ToolCall, outcome: Outcome) -> Outcome:
        return replace(outcome, content=f"[{outcome.content}]")

    hooks = [Hooks(after_tool=upper), Hooks(after_tool=lambda *a: None), Hooks(after_tool=tagged)]
    result = await drive(Session(agent(*hooks)).run("go"))
    [done] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert (done.content, done.is_error) == ("[X]", False)


async def test_before_tool_replacements_chain_and_the_tool_gets_the_last():
    def to_y(info: RunInfo, call: ToolCall) -> dict[str, Any]:
        seen.append(("first saw", call.args))
        return {"text": "y"}

    async def to_z(info: RunInfo, call: ToolCall) -> dict[str, Any]:
        seen.append(("second saw", call.args))
        return {"text": call.args["text"] + "z"}

    hooks = [Hooks(before_tool=to_y), Hooks(before_tool=lambda *a: None), Hooks(before_tool=to_z)]
    result = await drive(Session(agent(*hooks)).run("go"))
    assert seen == [("first saw", {"text": "x"}), ("second saw", {"text": "y"}), ("echo", "yz")]
    assert types(result.events) == [
        "session",
        "input:received",
        *TOOL_STEP,
        *TEXT_STEP,
        "loop:done",
        "done",
    ]


async def test_the_first_block_ends_the_before_tool_chain():
    def blocks(info: RunInfo, call: ToolCall) -> Block:
        seen.append("blocks")
        return Block("not today")

    def never(info: RunInfo, call: ToolCall) -> None:
        seen.append("never")

    hooks = [Hooks(before_tool=lambda *a: {"text": "y"}), Hooks(before_tool=blocks)]
    result = await drive(Session(agent(*hooks, Hooks(before_tool=never))).run("go"))
    assert seen == ["blocks"]
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "message:completed",
        "tool:output",
        "tool:result",
        "step:finished",
        *TEXT_STEP,
        "loop:done",
        "done",
    ]
    [done] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert (done.content, done.is_error) == ("Blocked: not today", True)


async def test_on_prompt_contexts_chain_and_a_block_ends_the_chain():
    def first(info: RunInfo, text: str) -> str:
        seen.append(text)
        return "context one"

    async def second(info: RunInfo, text: str) -> str:
        seen.append(text)
        return "context two"

    model = scripted("done")
    base = Agent(model=model, hooks=compose(Hooks(on_prompt=first), Hooks(on_prompt=second)))
    result = await drive(Session(base).run("hello"))
    assert seen == ["hello", "hello\n\ncontext one"]
    [received] = [e for e in result.events if isinstance(e, ev.InputReceived)]
    assert received.message.content == "hello\n\ncontext one\n\ncontext two"

    seen.clear()
    blocking = compose(
        Hooks(on_prompt=first), Hooks(on_prompt=lambda i, t: Block("no")), Hooks(on_prompt=second)
    )
    result = await drive(Session(replace(base, hooks=blocking)).run("hello"))
    assert seen == ["hello"]
    assert types(result.events) == ["session", "loop:terminated", "done"]
    assert result.stop_reason == "terminated"


async def test_the_first_stop_ends_the_continuation_chain():
    def goes_on(info: RunInfo, reply: Any) -> None:
        seen.append("goes on")

    async def stops(info: RunInfo, reply: Any) -> Stop:
        seen.append("stops")
        return Stop("enough")

    def never(info: RunInfo, reply: Any) -> None:
        seen.append("never")

    hooks = [Hooks(continuation=h) for h in (goes_on, stops, never)]
    result = await drive(Session(agent(*hooks)).run("go"))
    assert seen == [("echo", "x"), "goes on", "stops"] and result.stop_reason == "terminated"
    assert types(result.events) == [
        "session",
        "input:received",
        *TOOL_STEP,
        "loop:terminated",
        "done",
    ]
    assert [e.reason for e in result.events if isinstance(e, ev.LoopTerminated)] == ["enough"]


async def test_the_first_stop_hook_that_asks_to_go_on_wins():
    def silent(info: RunInfo, text: str) -> None:
        seen.append(("silent", text))

    async def more(info: RunInfo, text: str) -> str | None:
        seen.append(("more", text))
        return "one more thing" if text == "first" else None

    def never(info: RunInfo, text: str) -> str | None:
        seen.append(("never", text))
        return "never" if text == "first" else None

    hooks = [Hooks(on_stop=silent), Hooks(on_stop=more), Hooks(on_stop=never)]
    base = Agent(model=scripted("first", "second"), hooks=compose(*hooks))
    result = await drive(Session(base).run("go"))
    assert (result.stop_reason, result.text) == ("completed", "second")
    assert seen == [
        ("silent", "first"),
        ("more", "first"),
        ("silent", "second"),
        ("more", "second"),
        ("never", "second"),
    ]
    assert types(result.events) == [
        "session",
        "input:received",
        *TEXT_STEP,
        "steering:injected",
        *TEXT_STEP,
        "loop:done",
        "done",
    ]


async def test_a_transform_hook_that_raises_ends_the_chain_and_the_run(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")

    def broken(info: RunInfo, request: ModelRequest) -> None:
        seen.append("broken")
        raise ValueError("bad transform")

    def never(info: RunInfo, request: ModelRequest) -> None:
        seen.append("never")

    hooks = compose(Hooks(before_request=broken), Hooks(before_request=never))
    result = await drive(Session(Agent(model=scripted("done"), hooks=hooks)).run("go"))
    assert seen == ["broken"] and result.stop_reason == "error"
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "step:finished",
        "loop:error",
        "done",
    ]
    [error] = [e for e in result.events if isinstance(e, ev.LoopError)]
    assert "bad transform" in error.error
    [record] = [r for r in caplog.records if r.name == "loopwright.hooks"]
    exc = record.exc_info[1] if record.exc_info else None
    assert isinstance(exc, ValueError) and exc.__notes__ == [
        "(raised by the before_request hook test_hook_chain."
        "test_a_transform_hook_that_raises_ends_the_chain_and_the_run.<locals>.broken, "
        "in a composed chain)"
    ]
