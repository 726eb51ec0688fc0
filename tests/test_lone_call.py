"""A reply's one call that nothing can hold (no `before_tool` hook, no rules, no human: a sync
tool) is decided and run without `execute`'s generator (`Calls.lone`, `ToolRunner.lone`). The
stream must be the one `execute` gives: each case runs once that way and once with a
`before_tool` hook that changes nothing (which takes `execute`), and the two agree event for
event, in a stream pinned here."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Hooks, Session, tool
from loopwright.tools import NeedsAnswer, ToolReturn


@tool(inline=True)
def ping(i: int) -> str:
    """Answer at once, on the loop."""
    return f"pong {i}"


@tool
def echo(text: str) -> str:
    """Answer from a worker thread."""
    return text


@tool
def last(text: str) -> ToolReturn:
    """Answer, and end the run."""
    return ToolReturn(content=text, terminate=True)


@tool(inline=True)
def curious(text: str) -> NeedsAnswer | str:
    """Ask the person before answering."""
    return NeedsAnswer(question=f"really {text}?")


def described(events: list) -> list[tuple]:  # type: ignore[type-arg]
    """The stream without what differs per run (ids the run makes, the session id and the
    idempotency keys made of it)."""
    out = []
    for e in events:
        fields = {
            f.name: getattr(e, f.name)
            for f in dataclasses.fields(e)
            if f.name not in ("session_id", "id", "pending_ids", "requested_at", "idempotency_key")
        }
        out.append((e.type, tuple(sorted((k, repr(v)) for k, v in fields.items()))))
    return out


async def both(*replies: object, tools: list) -> list[tuple]:  # type: ignore[type-arg]
    """The run's stream at once and through `execute` (a hook that changes nothing): equal."""
    streams = []
    for hooks in (Hooks(), Hooks(before_tool=lambda info, call: None)):
        agent = Agent(model=scripted(*replies), tools=tools, hooks=hooks)
        streams.append(described((await drive(Session(agent).run("go"))).events))
    at_once, executed = streams
    assert at_once == executed
    return [t for t, _ in at_once]


STEP = ["step:started", "budget:check"]


@pytest.mark.parametrize("used", [ping, echo], ids=["inline", "threaded"])
async def test_a_lone_sync_call_with_text_runs_as_execute_runs_it(used: object) -> None:
    name = "ping" if used is ping else "echo"
    args = {"i": 1} if used is ping else {"text": "p"}
    reply = {"text": "let me see", "tool_calls": [call(name, "c1", **args)]}
    assert await both(reply, "done", tools=[used]) == [
        "session",
        "input:received",
        *STEP,
        "text:delta",
        "tool:delta",
        "message:completed",
        "assistant:text",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        *STEP,
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]


async def test_a_lone_call_with_invalid_arguments_gets_its_error_as_execute_gives_it() -> None:
    reply = {"tool_calls": [call("ping", "c1", i="one")]}
    assert await both(reply, "done", tools=[ping]) == [
        "session",
        "input:received",
        *STEP,
        "tool:delta",
        "message:completed",
        "tool:output",
        "tool:result",
        "step:finished",
        *STEP,
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]


async def test_a_lone_call_that_says_terminate_ends_the_run_as_execute_ends_it() -> None:
    reply = {"tool_calls": [call("last", "c1", text="bye")]}
    assert await both(reply, tools=[last]) == [
        "session",
        "input:received",
        *STEP,
        "tool:delta",
        "message:completed",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:terminated",
        "done",
    ]


async def test_a_lone_call_that_needs_an_answer_pauses_the_run_as_execute_pauses_it() -> None:
    reply = {"tool_calls": [call("curious", "c1", text="so")]}
    assert await both(reply, tools=[curious]) == [
        "session",
        "input:received",
        *STEP,
        "tool:delta",
        "message:completed",
        "actauth:decision",
        "tool:started",
        "question:pending",
        "pending:requested",
        "tool:suspended",
        "step:finished",
        "loop:paused",
        "done",
    ]
