"""The hook points `transform_reply`, `around_tool` and `after_batch` through real runs: exact
event sequences, what the history holds and the next request gets, composed chains, failures,
a cancel while a call's around hook runs, and the log (SQLite) giving back the same history."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, scripted, verify
from loopwright import Agent, Hooks, Session, tool
from loopwright import events as ev
from loopwright.hooks import RunInfo
from loopwright.loop.hook_chain import compose
from loopwright.loop.hook_points import CUT
from loopwright.messages import AssistantMessage, Text, ToolCall, ToolResultMessage, UserMessage
from loopwright.testing import types
from loopwright.tools import Outcome

ran: list[Any] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


@tool
def echo(text: str) -> str:
    """Echo (in a worker thread)."""
    ran.append(("echo", text))
    return text


@tool(inline=True)
def shout(text: str) -> str:
    """Shout (inline, on the loop)."""
    ran.append(("shout", text))
    return text.upper()


@tool
async def fetch(text: str) -> str:
    """Fetch (a coroutine)."""
    ran.append(("fetch", text))
    return f"fetched {text}"


CALL_STEP = [
    "actauth:decision",
    "tool:started",
    "toollane:result",
    "tool:output",
    "tool:result",
]
TEXT_STEP = ["step:started", "budget:check", "text:delta", "message:completed", "step:finished"]


def echo_then_done(*tools: Any, **hooks: Any) -> Agent:
    model = scripted({"tool_calls": [call("echo", "c1", text="x")]}, "done")
    return Agent(model=model, tools=list(tools) or [echo], hooks=Hooks(**hooks))


def outputs(events: list[ev.Event]) -> dict[str, tuple[str, bool]]:
    return {e.id: (e.content, e.is_error) for e in events if isinstance(e, ev.ToolOutput)}


# ---- transform_reply ------------------------------------------------------------------------


def to_y(info: RunInfo, reply: AssistantMessage) -> AssistantMessage | None:
    """Fix the model's argument: `x` becomes `y` (a reply without calls is kept)."""
    if not reply.tool_calls:
        return None
    parts = [replace(p, args={"text": "y"}) if isinstance(p, ToolCall) else p for p in reply.parts]
    return replace(reply, parts=tuple(parts))


async def test_a_transformed_reply_is_logged_after_its_original_and_is_what_runs():
    seen: list[AssistantMessage] = []
    agent = echo_then_done(transform_reply=to_y, after_reply=lambda i, r: seen.append(r))
    session = Session(agent)
    result = await drive(session.run("go"))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "reply:transformed",
        "message:completed",
        *CALL_STEP,
        "step:finished",
        *TEXT_STEP,  # (the text reply, kept: no reply:transformed)
        "loop:done",
        "done",
    ]
    [audit] = [e for e in result.events if isinstance(e, ev.ReplyTransformed)]
    completed = [e.message for e in result.events if isinstance(e, ev.MessageCompleted)]
    assert audit.original.tool_calls == [ToolCall(id="c1", name="echo", args={"text": "x"})]
    assert completed[0].tool_calls == [ToolCall(id="c1", name="echo", args={"text": "y"})]
    assert completed[0].usage == audit.original.usage
    assert ran == [("echo", "y")]
    assert seen == completed  # after_reply sees the reply the run acts on
    assert session.messages[1] == completed[0]
    assert [e.args for e in result.events if isinstance(e, ev.ToolStarted)] == [{"text": "y"}]


async def test_a_transform_that_keeps_the_reply_logs_no_audit():
    same = echo_then_done(transform_reply=lambda info, reply: reply)
    result = await drive(Session(same).run("go"))
    assert "reply:transformed" not in types(result.events)
    assert ran == [("echo", "x")]


async def test_transform_reply_hooks_chain_in_order():
    def tag(label: str) -> Any:
        async def hook(info: RunInfo, reply: AssistantMessage) -> AssistantMessage:
            return replace(reply, parts=(Text(text=f"{reply.text}+{label}"),))

        return hook

    agent = Agent(
        model=scripted("model"),
        hooks=compose(Hooks(transform_reply=tag("a")), Hooks(transform_reply=tag("b"))),
    )
    result = await drive(Session(agent).run("go"))
    assert types(result.events)[4:7] == ["text:delta", "reply:transformed", "message:completed"]
    [audit] = [e for e in result.events if isinstance(e, ev.ReplyTransformed)]
    assert audit.original.text == "model"
    assert (result.text, result.stop_reason) == ("model+a+b", "completed")


async def test_a_transform_that_raises_ends_the_run_and_logs_no_reply(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")

    def broken(info: RunInfo, reply: AssistantMessage) -> None:
        raise ValueError("no")

    session = Session(echo_then_done(transform_reply=broken))
    result = await drive(session.run("go"))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "step:finished",
        "loop:error",
        "done",
    ]
    assert result.events[-2] == ev.LoopError(error="ValueError: no")
    assert ran == [] and [m.role for m in session.messages] == ["user"]
    assert "hook test_hook_points.test_a_transform_that_raises" in caplog.text


# ---- around_tool ----------------------------------------------------------------------------


@pytest.mark.parametrize("chosen", [echo, shout, fetch], ids=["thread", "inline", "async"])
async def test_around_tool_wraps_the_call_and_its_outcome_is_the_result(chosen: Any):
    name = chosen.name

    async def timed(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
        ran.append(("before", call.name, call.args))
        outcome = await proceed()
        ran.append(("after", outcome.content))
        return replace(outcome, content=f"{outcome.content} (timed)")

    model = scripted({"tool_calls": [call(name, "c1", text="x")]}, "done")
    result = await drive(
        Session(Agent(model=model, tools=[chosen], hooks=Hooks(around_tool=timed))).run("go")
    )
    expected = {"echo": "x", "shout": "X", "fetch": "fetched x"}[name]
    assert ran == [("before", name, {"text": "x"}), (name, "x"), ("after", expected)]
    assert types(result.events)[5:11] == ["message:completed", *CALL_STEP]
    assert outputs(result.events) == {"c1": (f"{expected} (timed)", False)}


async def test_around_tool_may_cache_and_retry_and_after_tool_sees_its_outcome():
    cache: dict[str, Outcome] = {}

    def cached(info: RunInfo, call: ToolCall, proceed: Any) -> Any:
        """Sync: a cached outcome, or proceed's awaitable (the runner awaits it)."""
        return cache.get(call.args["text"]) or proceed()

    async def twice(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
        first = await proceed()
        cache[call.args["text"]] = again = await proceed()  # a retry of the tool's own
        return replace(again, content=f"{first.content}/{again.content}")

    hooks = compose(Hooks(around_tool=cached), Hooks(around_tool=twice))
    hooks = replace(hooks, after_tool=lambda i, c, o: replace(o, content=f"<{o.content}>"))
    model = scripted(
        {"tool_calls": [call("echo", "c1", text="x")]},
        {"tool_calls": [call("echo", "c2", text="x")]},
        "done",
    )
    result = await drive(Session(Agent(model=model, tools=[echo], hooks=hooks)).run("go"))
    assert ran == [("echo", "x"), ("echo", "x")]  # the second call came from the cache
    assert outputs(result.events) == {"c1": ("<x/x>", False), "c2": ("<x>", False)}


async def test_composed_around_hooks_nest_the_first_outermost():
    def wrap(label: str) -> Any:
        async def hook(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
            ran.append(f"{label}>")
            outcome = await proceed()
            ran.append(f"<{label}")
            return replace(outcome, content=f"{label}({outcome.content})")

        return hook

    hooks = compose(Hooks(around_tool=wrap("a")), Hooks(around_tool=wrap("b")))
    result = await drive(Session(replace(echo_then_done(), hooks=hooks)).run("go"))
    assert ran == ["a>", "b>", ("echo", "x"), "<b", "<a"]
    assert outputs(result.events) == {"c1": ("a(b(x))", False)}


@pytest.mark.parametrize("proceeds", [False, True], ids=["before", "after"])
async def test_an_around_hook_that_raises_is_the_calls_error_and_the_run_goes_on(
    proceeds: bool, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")

    async def broken(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
        if proceeds:
            await proceed()
        raise KeyError("cache")

    result = await drive(Session(echo_then_done(around_tool=broken)).run("go"))
    assert (result.stop_reason, result.text) == ("completed", "done")
    what = "the call ran, its output is withheld" if proceeds else "the call did not run"
    text = f"[error: around_tool hook failed ({what}): KeyError: 'cache']"
    assert outputs(result.events) == {"c1": (text, True)}
    assert ran == ([("echo", "x")] if proceeds else [])
    statuses = [e.status_text for e in result.events if isinstance(e, ev.ToolResult)]
    assert statuses == ["Error."]
    assert "around_tool hook test_hook_points." in caplog.text and "KeyError" in caplog.text


async def test_an_around_hook_returning_no_outcome_is_the_calls_error():
    result = await drive(Session(echo_then_done(around_tool=lambda i, c, p: None)).run("go"))
    text = "[error: around_tool hook failed (the call did not run): TypeError: around_tool "
    assert outputs(result.events) == {"c1": (text + "returned NoneType, not an Outcome]", True)}


async def test_a_cancel_while_the_around_hook_runs_after_its_call_withholds_the_output():
    """P3: the call ran, its hook was cut short: the result says so, never the raw output."""
    proceeded = asyncio.Event()

    async def slow(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
        outcome = await proceed()
        proceeded.set()
        await asyncio.Event().wait()  # (cancelled here)
        return outcome

    model = scripted({"tool_calls": [call("fetch", "c1", text="x")]}, "done")
    session = Session(Agent(model=model, tools=[fetch], hooks=Hooks(around_tool=slow)))
    events = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            await proceeded.wait()
            session.cancel()
    verify(events)
    assert ran == [("fetch", "x")]
    assert outputs(events) == {"c1": (CUT.content, True)}
    assert types(events)[-6:] == [
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]


# ---- after_batch ----------------------------------------------------------------------------


async def test_after_batch_context_joins_the_history_before_the_next_request():
    got: list[list[ToolResultMessage]] = []

    def note(info: RunInfo, results: list[ToolResultMessage]) -> str:
        got.append(results)
        return f"{len(results)} result(s) in"

    model = scripted(
        {"tool_calls": [call("echo", "c1", text="x"), call("shout", "c2", text="y")]}, "done"
    )
    session = Session(Agent(model=model, tools=[echo, shout], hooks=Hooks(after_batch=note)))
    result = await drive(session.run("go"))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "tool:delta",
        "message:completed",
        "actauth:decision",
        "actauth:decision",
        "tool:started",
        "tool:started",
        *["toollane:result", "tool:output", "tool:result"] * 2,
        "context:injected",
        "step:finished",
        *TEXT_STEP,
        "loop:done",
        "done",
    ]
    [[first, second]] = got
    assert (first.call_id, first.content, second.call_id, second.content) == ("c1", "x", "c2", "Y")
    context = UserMessage(content="2 result(s) in")
    assert [e for e in result.events if isinstance(e, ev.ContextInjected)] == [
        ev.ContextInjected(message=context)
    ]
    assert model.requests[1].messages[-1] == context
    assert session.messages[-2] == context
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]


async def test_after_batch_runs_for_a_lone_call_and_every_hooks_context_is_added_in_order():
    hooks = compose(
        Hooks(after_batch=lambda i, r: "first"),
        Hooks(after_batch=lambda i, r: None),
        Hooks(after_batch=lambda i, r: "second"),
    )
    session = Session(replace(echo_then_done(), hooks=hooks))
    result = await drive(session.run("go"))
    assert types(result.events)[5:13] == [
        "message:completed",
        *CALL_STEP,
        "context:injected",
        "step:finished",
    ]
    assert session.messages[3] == UserMessage(content="first\n\nsecond")


async def test_after_batch_with_no_context_adds_nothing():
    session = Session(echo_then_done(after_batch=lambda i, r: None))
    result = await drive(session.run("go"))
    assert "context:injected" not in types(result.events)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]


# ---- the log --------------------------------------------------------------------------------


async def test_the_log_gives_back_the_transformed_reply_and_the_context(tmp_path: Path):
    """A durable session's log holds the audit, the changed reply and the context; a session
    opened again from it has the history the run left (the reducer takes the changed reply)."""
    from loopwright.runtime import Settings
    from loopwright.runtime.journal import session_in_log
    from loopwright.store.log import SessionKey
    from loopwright.store.sqlite_log import SQLiteLog

    agent = echo_then_done(transform_reply=to_y, after_batch=lambda i, r: "noted")
    key = SessionKey("default", agent.name, "s-1")
    log = SQLiteLog(tmp_path / "log.db")
    try:
        session = await session_in_log(log, agent, key, Settings())
        live = await drive(session.run("go"))
        stored = [s.event for s in await log.read(key)]
        kept = {"reply:transformed", "message:completed", "context:injected", "tool:started"}
        assert [e for e in stored if e.type in kept] == [e for e in live.events if e.type in kept]
        again = await session_in_log(log, agent, key, Settings())
        assert again.messages == session.messages
        assert again.messages[1].tool_calls == [ToolCall(id="c1", name="echo", args={"text": "y"})]
        assert again.messages[3] == UserMessage(content="noted")
    finally:
        await log.close()


# ---- over HTTP ------------------------------------------------------------------------------

HOOKED_PY = '''\
from dataclasses import replace

from loopwright import Agent, Hooks, tool
from loopwright.messages import ToolCall
from loopwright.testing import ScriptedModel


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def to_y(info, reply):
    parts = [replace(p, args={"text": "y"}) if isinstance(p, ToolCall) else p for p in reply.parts]
    return replace(reply, parts=tuple(parts)) if reply.tool_calls else None


agent = Agent(
    name="hooked",
    model=ScriptedModel.from_script(
        [{"tool_calls": [{"name": "echo", "args": {"text": "x"}, "id": "c1"}]}, "done"] * 2
    ),
    tools=[echo],
    hooks=Hooks(transform_reply=to_y, after_batch=lambda info, results: "noted"),
)
'''


def test_over_http_the_full_profile_shows_the_audit_and_v1_is_unchanged(tmp_path: Path):
    from conftest import V1
    from live_server import LiveServer
    from loopwright.project import load_project
    from loopwright.server import create_app

    root = tmp_path / "project"
    (root / "agents" / "hooked").mkdir(parents=True)
    (root / "loopwright.toml").write_text("")
    (root / "agents" / "hooked" / "agent.py").write_text(HOOKED_PY)
    with LiveServer(create_app(load_project(root))) as live, live.client() as http:
        sent = {"message": "go", "sessionId": "s"}
        full = http.post("/agents/hooked/messages", json=sent)
        assert full.status_code == 200, full.text
        events = full.json()["events"]
        assert types(events) == [
            "session",
            "input:received",
            "step:started",
            "budget:check",
            "reply:transformed",
            "message:completed",
            *CALL_STEP,
            "context:injected",
            "step:finished",
            "step:started",
            "budget:check",
            "message:completed",
            "step:finished",
            "loop:done",
            "done",
        ]  # (a reply's deltas are not in the answer's events)
        [audit] = [e for e in events if e["type"] == "reply:transformed"]
        assert audit["original"]["parts"][0]["args"] == {"text": "x"}
        [started] = [e for e in events if e["type"] == "tool:started"]
        assert started["args"] == {"text": "y"}
        [context] = [e for e in events if e["type"] == "context:injected"]
        assert context["message"] == {"role": "user", "content": "noted"}
        v1 = http.post("/agents/hooked/messages?profile=v1", json={**sent, "sessionId": "t"})
        assert v1.status_code == 200, v1.text
        assert types(v1.json()["events"]) == [
            "session",
            "budget:check",
            "actauth:decision",
            "tool:started",
            "toollane:result",
            "tool:result",
            "budget:check",
            "loop:done",
            "done",
        ]
        for event in v1.json()["events"]:
            V1.validate(event)
        assert [e["args"] for e in v1.json()["events"] if e["type"] == "tool:started"] == [
            {"text": "y"}
        ]
        history = http.get("/agents/hooked/sessions/s").json()["history"]
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "user", "assistant"]


async def test_after_batch_runs_when_a_paused_batch_resumes_and_closes():
    from loopwright import Approval, Rules

    rules = Rules.from_yaml(
        "default_decision: allow\nrules: [{name: a, tool: echo, decision: ask}]"
    )
    hooks = Hooks(after_batch=lambda info, results: f"after {results[0].content}")
    model = scripted({"tool_calls": [call("echo", "c1", text="x")]}, "done")
    session = Session(Agent(model=model, tools=[echo], rules=rules, hooks=hooks))
    paused = await drive(session.run("go"))
    assert paused.stop_reason == "paused" and "context:injected" not in types(paused.events)
    [item] = session.pending
    await session.resolve(item.id, Approval.approve())
    resumed = await drive(session.resume())
    assert types(resumed.events) == [
        "session",
        "approval:resolved",
        "actauth:decision",
        *CALL_STEP[1:],
        "context:injected",  # (the resumed batch closed, outside a step)
        *TEXT_STEP,
        "loop:done",
        "done",
    ]
    assert (resumed.stop_reason, ran) == ("completed", [("echo", "x")])
    assert session.messages[3] == UserMessage(content="after x")
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "user", "assistant"]


def _register_around(reg: Any) -> None:
    async def outer(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
        ran.append("plugin>")
        return await proceed()

    reg.hooks(Hooks(around_tool=outer, after_batch=lambda info, results: "plugin"))


async def test_plugins_set_the_new_points_before_the_agents_own():
    from importlib.metadata import EntryPoint

    from loopwright.plugins import GROUP, load, with_plugins

    value = "test_hook_points:_register_around"
    found = load([EntryPoint(name="hp", value=value, group=GROUP)])

    async def own(info: RunInfo, call: ToolCall, proceed: Any) -> Outcome:
        ran.append("own>")
        return await proceed()

    agent = echo_then_done(around_tool=own, after_batch=lambda info, results: "own")
    session = Session(with_plugins(agent, found))
    await drive(session.run("go"))
    assert ran == ["plugin>", "own>", ("echo", "x")]
    assert session.messages[3] == UserMessage(content="plugin\n\nown")
