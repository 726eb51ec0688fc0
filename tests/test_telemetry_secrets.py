"""Spans keep secrets out (P11) — content off or on — and another tenant's run is never grafted
into a trace (P12)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import call, drive, scripted
from loopwright import Agent, Session, redact, telemetry, tool
from loopwright.subagents import subagent_tool

KEY = "sk-proj-AAAAbbbbCCCC1111dddd2222"  # a key's shape, whoever's it is
PASSWORD = "internal-db-password-XYZ"  # a value registered as a secret


@pytest.fixture
def secret() -> Iterator[str]:
    redact.register(PASSWORD)
    yield PASSWORD
    redact.forget(PASSWORD)


def exporter(capture: bool) -> tuple[InMemorySpanExporter, TracerProvider]:
    spans, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.enable(provider, capture_content=capture)
    return spans, provider


@pytest.fixture(params=[False, True], ids=["content off", "content on"])
def spans(request: pytest.FixtureRequest) -> Iterator[InMemorySpanExporter]:
    found, provider = exporter(request.param)
    yield found
    telemetry.disable()
    provider.shutdown()


@pytest.fixture
def capturing(request: pytest.FixtureRequest, spans: InMemorySpanExporter) -> bool:
    """Whether `spans` captures content (the statuses hold redacted text then, a kind else)."""
    return bool(request.node.callspec.params["spans"])


def everything(spans: InMemorySpanExporter) -> str:
    """Every span's name, attributes, status and events, as text."""
    return json.dumps([json.loads(s.to_json()) for s in spans.get_finished_spans()])


@tool
def connect(host: str, password: str) -> str:
    """Connect to a database."""
    raise RuntimeError(f"auth failed for key {KEY} / password {password}")


async def test_a_tools_failure_and_its_arguments_are_redacted(spans, capturing, secret):
    model = scripted(
        {"tool_calls": [call("connect", "c1", host="db", password=secret)]}, f"Failed: {KEY}"
    )
    await Session(Agent(name="ops", model=model, tools=[connect])).run(f"use {secret}").result()
    [used] = [s for s in spans.get_finished_spans() if s.name == "execute_tool connect"]
    assert used.status.description == (
        "Tool 'connect' failed: RuntimeError: auth failed for key [redacted] / password [redacted]"
        if capturing
        else "RuntimeError"
    )
    text = everything(spans)
    assert KEY not in text and secret not in text
    assert ("[redacted]" in str(used.attributes)) is ("gen_ai.tool.call.arguments" in text)


async def test_a_failed_runs_status_is_redacted(spans, capturing, secret):
    model = scripted({"fail": f"HTTP 401: Incorrect API key provided: {KEY} ({secret})"})
    result = await Session(Agent(name="ops", model=model)).run("go").result()  # (raw in-process)
    assert result.stop_reason == "error"
    [run] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent ops"]
    described = run.status.description or ""
    if capturing:
        assert described.endswith("Incorrect API key provided: [redacted] ([redacted])")
    else:
        assert described == "loop_error"  # the error's text is content
    text = everything(spans)
    assert KEY not in text and secret not in text


async def test_another_tenants_run_is_not_grafted_into_a_trace(spans):
    going, release = asyncio.Event(), asyncio.Event()

    @tool
    async def wait() -> str:
        """Takes its time."""
        going.set()
        await release.wait()
        return "waited"

    worker = Agent(
        name="slow",
        description="Slow.",
        model=scripted({"tool_calls": [call("wait", "w1")]}, "child done"),
        tools=[wait],
    )
    acme = Agent(
        name="desk",
        model=scripted({"tool_calls": [call("slow", "call_0", request="go")]}, "acme done"),
        tools=[subagent_tool(worker)],
    )
    first = asyncio.create_task(drive(Session(acme, session_id="order-1", tenant="acme").run("go")))
    await going.wait()  # acme's call `call_0` is in flight: its span is open
    globex = Agent(name="g", model=scripted("globex done"))
    await drive(Session(globex, session_id="order-1/slow/call_0", tenant="globex").run("hi"))
    release.set()
    await first
    finished = spans.get_finished_spans()
    [theirs] = [s for s in finished if s.name == "invoke_agent g"]
    [acmes_call] = [s for s in finished if s.name == "execute_tool slow"]
    [child] = [s for s in finished if s.name == "invoke_agent slow"]
    assert theirs.parent is None  # a trace of its own
    assert _tenants(theirs, acmes_call, child) == ["globex", "acme", "acme"]
    assert child.parent is not None and acmes_call.context is not None
    assert child.parent.span_id == acmes_call.context.span_id  # acme's own subagent still is


def _tenants(*spans: ReadableSpan) -> list[object]:
    return [(s.attributes or {}).get("loopwright.tenant") for s in spans]
