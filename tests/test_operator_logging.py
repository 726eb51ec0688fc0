"""Failures that are data for the model are also told to the operator (issue 14, item 8): a
tool that raises and a hook that raises are logged with their traceback under documented logger
names (README: Logging); an observe hook that raises does not end the run, which goes on with
`hook:failed` (dropped by the v1 profile)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Hooks, Session, tool
from loopwright import events as ev
from loopwright.errors import ToolError
from loopwright.testing import types
from loopwright.wire import to_dict


def boom(*args: Any) -> None:
    raise RuntimeError("observer bug")


@tool
async def async_fails() -> str:
    """Fails."""
    raise RuntimeError("disk on fire")


@tool
def thread_fails() -> str:
    """Fails in a worker thread."""
    raise RuntimeError("disk on fire")


@tool(inline=True)
def inline_fails() -> str:
    """Fails on the loop."""
    raise RuntimeError("disk on fire")


@tool
async def refuses() -> str:
    """Refuses, with a message for the model."""
    raise ToolError("no such order")


def records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name]


@pytest.mark.parametrize("failing", [async_fails, thread_fails, inline_fails])
async def test_a_tool_that_raises_is_logged_with_its_traceback(
    failing: Any, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG, logger="loopwright.tools")
    model = scripted({"tool_calls": [call(failing.name, "c1")]}, "sorry")
    result = await drive(Session(Agent(model=model, tools=[failing])).run("go"))
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert (output.content, output.is_error) == (
        f"Tool '{failing.name}' failed: RuntimeError: disk on fire",
        True,
    )
    [record] = records(caplog, "loopwright.tools")
    assert (record.levelname, record.getMessage()) == (
        "WARNING",
        f"tool {failing.name} (call c1) raised",
    )
    assert record.exc_info is not None and str(record.exc_info[1]) == "disk on fire"
    assert 'raise RuntimeError("disk on fire")' in caplog.text  # the traceback, formatted


async def test_a_tool_error_meant_for_the_model_is_logged_at_debug(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.DEBUG, logger="loopwright.tools")
    model = scripted({"tool_calls": [call("refuses", "c1")]}, "sorry")
    await drive(Session(Agent(model=model, tools=[refuses])).run("go"))
    [record] = records(caplog, "loopwright.tools")
    assert (record.levelname, record.getMessage()) == ("DEBUG", "tool refuses (call c1) raised")
    assert record.exc_info is not None and isinstance(record.exc_info[1], ToolError)


async def test_each_observe_hook_that_raises_is_logged_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")
    hooks = Hooks(on_run_start=boom, after_reply=boom, on_run_end=boom)
    model = scripted({"tool_calls": [call("echo", "c1", text="x")]}, "done")

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    result = await drive(Session(Agent(model=model, tools=[echo], hooks=hooks)).run("go"))
    assert (result.stop_reason, result.text) == ("completed", "done")
    assert types(result.events) == [
        "session",
        "hook:failed",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "message:completed",
        "hook:failed",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        "step:started",
        "budget:check",
        "text:delta",
        "message:completed",
        "hook:failed",
        "step:finished",
        "hook:failed",
        "loop:done",
        "done",
    ]
    failed = [e for e in result.events if isinstance(e, ev.HookFailed)]
    assert [(e.hook, e.error) for e in failed] == [
        ("on_run_start", "RuntimeError: observer bug"),
        ("after_reply", "RuntimeError: observer bug"),
        ("after_reply", "RuntimeError: observer bug"),
        ("on_run_end", "RuntimeError: observer bug"),
    ]
    assert all(to_dict(e, "v1") is None for e in failed)  # additive: v1 clients never see it
    logged = records(caplog, "loopwright.hooks")
    assert [(r.levelname, r.getMessage()) for r in logged] == [
        ("ERROR", f"observe hook {point} (test_operator_logging.boom) raised; the run goes on")
        for point in ("on_run_start", "after_reply", "after_reply", "on_run_end")
    ]
    assert all(r.exc_info is not None and str(r.exc_info[1]) == "observer bug" for r in logged)
    assert 'raise RuntimeError("observer bug")' in caplog.text


async def test_a_transform_hook_that_raises_ends_the_run_and_is_logged(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.ERROR, logger="loopwright.hooks")
    hooks = Hooks(before_request=boom)
    result = await drive(Session(Agent(model=scripted("never"), hooks=hooks)).run("go"))
    assert types(result.events)[-4:] == ["budget:check", "step:finished", "loop:error", "done"]
    assert result.events[-2] == ev.LoopError(error="RuntimeError: observer bug")
    [record] = records(caplog, "loopwright.hooks")
    assert (record.levelname, record.getMessage()) == (
        "ERROR",
        "hook test_operator_logging.boom raised; the run ends with loop:error",
    )
    assert record.exc_info is not None and str(record.exc_info[1]) == "observer bug"
