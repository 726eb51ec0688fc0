"""Observers and entered toolsets belong to whoever runs sessions (issue 30, point 7): a session
is given its observers as it is made (its subagents get them too), a runtime gives its own to
every session it drives and owns the live toolsets they enter (exited as it closes, entered
again by another runtime on its own); tracing, given none, is the process's default as the
session or runtime is made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conftest import call, drive, scripted
from loopwright import Agent, Session, telemetry
from loopwright.runtime import Runtime
from loopwright.subagents import subagents
from loopwright.tools import Tool
from loopwright.toolsets import Toolset
from runtime_fixtures import ended, logs, runtimes  # noqa: F401 (fixtures)
from test_toolsets import ping


class Recorder:
    """An observer: the event types of each run it sees, by session id (None: the run's end)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, list[str | None]]] = []

    def __call__(self, run: Any, session: Session | None) -> Any:
        seen: list[str | None] = []
        self.runs.append((run.session_id, seen))
        return lambda event: seen.append(None if event is None else event.type)


class Counting(Toolset):
    """A live toolset offering `ping` that counts its entries and exits."""

    name = "counting"

    def __init__(self) -> None:
        self.entered = self.exited = 0

    async def enter(self) -> None:
        self.entered += 1

    async def list_tools(self) -> Sequence[Tool]:
        return [ping]

    async def exit(self) -> None:
        self.exited += 1


async def test_a_sessions_observers_see_its_runs_and_its_subagents_runs():
    recorder = Recorder()
    child = Agent(name="helper", description="Helps.", model=scripted("helped"))
    model = scripted({"tool_calls": [call("helper", "c1", request="help")]}, "done")
    parent = Agent(model=model, tools=[subagents(child)])
    result = await drive(Session(parent, session_id="p", observers=[recorder]).run("go"))
    await drive(Session(Agent(model=scripted("hi"))).run("go"))  # given none: tracing is off

    [(parent_id, parents), (child_id, childs)] = sorted(recorder.runs)
    assert (parent_id, child_id) == ("p", "p/helper/c1")
    assert parents == [e.type for e in result.events] + [None]
    assert childs == [
        *("session", "input:received", "step:started", "budget:check", "text:delta"),
        *("message:completed", "step:finished", "loop:done", "done", None),
    ]


async def test_a_runtime_gives_its_observers_to_its_sessions_and_owns_their_toolsets(
    logs,  # noqa: F811
):
    recorder, source = Recorder(), Counting()
    agent = Agent(name="a", model=scripted({"tool_calls": [call("ping")]}, "one"), tools=[source])
    log = await logs()
    first = Runtime({"a": agent}, log, observers=[recorder])
    assert (await ended(await first.send("acme", "a", "s1", "go"))).text == "one"
    assert [sid for sid, _ in recorder.runs] == ["s1"]
    assert recorder.runs[0][1][-2:] == ["done", None]
    assert (source.entered, source.exited) == (1, 0)
    assert source in first.settings.toolsets

    second = Runtime({"a": agent}, log)  # another owner: it enters the toolset for itself
    assert (await ended(await second.send("acme", "a", "s2", "go"))).text == "one"
    assert [sid for sid, _ in recorder.runs] == ["s1"]  # not the first runtime's observers
    assert (source.entered, source.exited) == (2, 0)
    await first.close()
    assert (source.entered, source.exited) == (2, 1) and source not in first.settings.toolsets
    await second.close()
    assert source.exited == 2


async def test_tracing_is_the_default_read_as_a_session_is_made():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(provider)
    try:
        traced = Session(Agent(name="traced", model=scripted("hi")))
        assert telemetry.observers() == traced.observers != ()
    finally:
        telemetry.disable()
    untraced = Session(Agent(name="untraced", model=scripted("hi")))
    assert telemetry.observers() == untraced.observers == ()
    await drive(traced.run("go"))  # made while tracing was on: traced still
    await drive(untraced.run("go"))
    assert [s.name for s in exporter.get_finished_spans()] == ["chat inline", "invoke_agent traced"]
