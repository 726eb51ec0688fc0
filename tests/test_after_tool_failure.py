"""A transform `after_tool` hook (a redaction, say) that fails never lets the raw output through
(issue 30, window 5): the run ends with `loop:error` (a cancel that stops the hook, with
`loop:aborted`) and the call's result says its output is withheld — in the events, the history,
the next model request, the log and a session read again from it, and the spans."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import call, drive, scripted, verify
from loopwright import Agent, Hooks, Session, telemetry, tool
from loopwright.events import Event
from loopwright.loop.calls import STOPPED, UNHOOKED
from loopwright.messages import ToolResultMessage
from loopwright.testing import types
from loopwright.wire import to_dict

RAW = "customer card 4111-1111-1111-1111, home 1 Elm Street"

ONE_CALL = [
    "session",
    "input:received",
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


@tool
def lookup() -> str:
    """Look the customer up."""
    return RAW


@tool
async def fetch() -> str:
    """Fetch the customer's record."""
    return RAW


def broken_redaction(info: Any, call: Any, outcome: Any) -> None:
    raise RuntimeError("the redaction service is down")


def outputs(events: list[Event]) -> list[tuple[str, str, bool]]:
    return [(e.id, e.content, e.is_error) for e in events if e.type == "tool:output"]  # type: ignore[attr-defined]


def results(messages: list[Any]) -> list[tuple[str, str, bool]]:
    return [
        (m.call_id, m.content, m.is_error) for m in messages if isinstance(m, ToolResultMessage)
    ]


def wire(events: list[Event]) -> str:
    return json.dumps([to_dict(e) for e in events])


async def test_a_raising_after_tool_hook_withholds_the_output_from_events_history_and_model():
    model = scripted({"tool_calls": [call("lookup", "a")]}, "sorry")
    session = Session(Agent(model=model, tools=[lookup], hooks=Hooks(after_tool=broken_redaction)))
    result = await drive(session.run("who is it?"))
    assert types(result.events) == [*ONE_CALL, "loop:error", "done"]
    assert result.events[-2].error == "RuntimeError: the redaction service is down"  # type: ignore[attr-defined]
    assert outputs(result.events) == [("a", UNHOOKED, True)]
    assert [e.status_text for e in result.events if e.type == "tool:result"] == ["Error."]  # type: ignore[attr-defined]
    assert RAW not in wire(result.events)
    assert results(session.messages) == [("a", UNHOOKED, True)]
    await drive(session.run("and now?"))  # the next request carries the withheld result only
    assert results(model.requests[1].messages) == [("a", UNHOOKED, True)]
    assert RAW not in repr(model.requests[1])


async def test_a_raising_hook_in_a_batch_withholds_its_call_and_stops_the_sibling():
    """Concurrent calls: the hook of the call that finished raises while its sibling runs."""
    never = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait."""
        await never.wait()
        return "never"

    model = scripted({"tool_calls": [call("fetch", "a"), call("wait", "b")]})
    agent = Agent(model=model, tools=[fetch, wait], hooks=Hooks(after_tool=broken_redaction))
    result = await drive(Session(agent).run("go"))
    assert types(result.events)[-9:] == [
        "toollane:result",
        "tool:output",
        "tool:result",
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:error",
        "done",
    ]
    assert outputs(result.events) == [("a", UNHOOKED, True), ("b", STOPPED, True)]
    assert RAW not in wire(result.events)


async def test_a_cancel_that_stops_an_async_after_tool_hook_withholds_the_output():
    entered = asyncio.Event()

    async def slow_redaction(info: Any, call: Any, outcome: Any) -> None:
        entered.set()
        await asyncio.Event().wait()  # (cancelled here)

    model = scripted({"tool_calls": [call("fetch", "a")]})
    session = Session(Agent(model=model, tools=[fetch], hooks=Hooks(after_tool=slow_redaction)))
    run = session.run("go")
    ending = asyncio.create_task(drive(run))
    await entered.wait()
    session.cancel()
    result = await ending
    assert types(result.events) == [*ONE_CALL, "loop:aborted", "done"]
    assert outputs(result.events) == [("a", UNHOOKED, True)]
    assert RAW not in wire(result.events)
    assert results(session.messages) == [("a", UNHOOKED, True)]


async def test_a_durable_session_logs_and_reads_back_the_withheld_result(tmp_path: Path):
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey, open_log

    model = scripted({"tool_calls": [call("lookup", "a")]}, "sorry")
    hooks = Hooks(after_tool=broken_redaction)
    agent = Agent(name="desk", model=model, tools=[lookup], hooks=hooks)
    log = await open_log(tmp_path / "db.sqlite")
    try:
        session = await open_session(agent, log, "s1")
        result = await drive(session.run("who is it?"))
        assert result.stop_reason == "error"
        stored = [s.event for s in await log.read(SessionKey("default", "desk", "s1"))]
        assert [e.type for e in stored] == [
            *(t for t in ONE_CALL if t != "tool:delta"),
            "loop:error",
            "done",
        ]
        assert outputs(stored) == [("a", UNHOOKED, True)]
        again = await open_session(agent, log, "s1")  # as another process would
        assert results(again.messages) == [("a", UNHOOKED, True)]
        await drive(again.run("and now?"))
        assert results(model.requests[1].messages) == [("a", UNHOOKED, True)]
    finally:
        await log.close()
    assert not [p.name for p in tmp_path.iterdir() if RAW.encode() in p.read_bytes()]


async def test_spans_never_see_the_output_a_failing_hook_withheld():
    spans, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.enable(provider, capture_content=True)
    try:
        model = scripted({"tool_calls": [call("lookup", "a")]})
        agent = Agent(
            name="desk", model=model, tools=[lookup], hooks=Hooks(after_tool=broken_redaction)
        )
        result = await drive(Session(agent).run("go"))
    finally:
        telemetry.disable()
        provider.shutdown()
    assert result.stop_reason == "error"
    text = json.dumps([json.loads(s.to_json()) for s in spans.get_finished_spans()])
    assert "execute_tool lookup" in text and UNHOOKED in text and RAW not in text


async def test_a_late_result_is_withheld_when_its_after_tool_hook_cannot_run():
    """A threaded call given up by a cancel finishes later: its hook never sees that result, so
    the `tool:late_result` (and the operators' log) carries the withheld text, not the raw output."""
    entered, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Fetch slowly."""
        entered.set()
        release.wait(30.0)
        return RAW

    def redaction(info: Any, call: Any, outcome: Any) -> Any:
        return replace(outcome, content="[redacted]")

    model = scripted({"tool_calls": [call("slow", "a")]})
    session = Session(Agent(model=model, tools=[slow], hooks=Hooks(after_tool=redaction)))
    events: list[Event] = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            await asyncio.to_thread(entered.wait, 30.0)
            session.cancel()
        if event.type == "tool:output":
            release.set()
    verify(events)
    assert [(e.id, e.content, e.is_error) for e in events if e.type == "tool:late_result"] == [  # type: ignore[attr-defined]
        ("a", UNHOOKED, True)
    ]
    assert RAW not in wire(events)
