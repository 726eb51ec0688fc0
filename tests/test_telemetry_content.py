"""Content stays out of spans unless content capture is on (docs/telemetry.md, "What spans
carry"): a tool's output and its error text, a model's failure, the input, the reply, the
arguments, a human's reason and a model-made tool name appear in no field of any span with
capture off, and exactly where the docs say with it on. Markers are secret-free, so redaction
cannot hide them: only the content switch can."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from conftest import call, drive, scripted
from loopwright import Agent, Approval, Rules, Session, telemetry, tool
from loopwright.errors import ToolError
from loopwright.telemetry import content

FAILED = "marker-tool-error-3141"
OUTPUT = "marker-tool-output-2718"
MODEL = "marker-model-failure-1618"


@pytest.fixture(params=[False, True], ids=["capture off", "capture on"])
def capture(request: pytest.FixtureRequest) -> Iterator[tuple[bool, InMemorySpanExporter]]:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(provider, capture_content=request.param)
    yield request.param, exporter
    telemetry.disable()
    provider.shutdown()


def fields(span: ReadableSpan) -> Iterator[tuple[str, str]]:
    """Every field of a span as (where, text): its name, each attribute, each event (its
    name and attributes), its status and each link (its context and attributes)."""
    yield "name", span.name
    for key, value in (span.attributes or {}).items():
        for item in value if isinstance(value, tuple) else (value,):
            yield key, str(item)
    for event in span.events:
        yield "event", event.name
        for key, value in (event.attributes or {}).items():
            yield f"event {event.name} {key}", str(value)
    yield "status", span.status.description or ""
    for link in span.links:
        yield "link", str(link.context)
        for key, value in (link.attributes or {}).items():
            yield f"link {key}", str(value)


def found(exporter: InMemorySpanExporter, marker: str) -> list[tuple[str, str]]:
    """(span name, field) of every field holding `marker`, checked against the spans' whole
    export (`to_json`: resource and context too) so no field is missed."""
    finished = exporter.get_finished_spans()
    places = sorted(
        {(s.name, where) for s in finished for where, text in fields(s) if marker in text}
    )
    exported = marker in json.dumps([json.loads(s.to_json()) for s in finished])
    assert exported is bool(places), "the marker is in a field `fields` does not walk"
    return places


@tool
def explode(order: str) -> str:
    """Always fails."""
    raise RuntimeError(f"order {order}: {FAILED}")


@tool
def refuse(order: str) -> str:
    """Fails with a message meant for the model."""
    raise ToolError(f"cannot refund {order}: {FAILED}")


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: {OUTPUT}"


@pytest.mark.parametrize("name, kind", [("explode", "RuntimeError"), ("refuse", "tool_error")])
async def test_a_tools_error_text(capture, name, kind):
    on, spans = capture
    model = scripted({"tool_calls": [call(name, "c1", order="7")]}, "It failed.")
    agent = Agent(name="desk", model=model, tools=[explode, refuse])
    assert (await drive(Session(agent).run("go"))).stop_reason == "completed"
    [failed] = [s for s in spans.get_finished_spans() if s.name == f"execute_tool {name}"]
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == kind
    if not on:
        assert found(spans, FAILED) == []
        assert failed.status.description == kind
        return
    assert failed.status.description is not None and FAILED in failed.status.description
    assert found(spans, FAILED) == [
        ("chat inline", "gen_ai.input.messages"),  # the second request: the result is history
        (f"execute_tool {name}", "gen_ai.tool.call.result"),
        (f"execute_tool {name}", "status"),
    ]


async def test_a_tools_output(capture):
    on, spans = capture
    model = scripted({"tool_calls": [call("lookup", "c1", order="7")]}, "Shipped.")
    await drive(Session(Agent(name="desk", model=model, tools=[lookup])).run("go"))
    assert found(spans, OUTPUT) == (
        [
            ("chat inline", "gen_ai.input.messages"),
            ("execute_tool lookup", "gen_ai.tool.call.result"),
        ]
        if on
        else []
    )


async def test_a_models_failure(capture):
    on, spans = capture
    model = scripted({"fail": f"HTTP 400: the request near {MODEL} is invalid"})
    assert (
        await Session(Agent(name="desk", model=model)).run("go").result()
    ).stop_reason == "error"
    [run] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent desk"]
    assert run.status.status_code is StatusCode.ERROR
    assert (run.attributes or {})["error.type"] == "loop_error"
    if not on:
        assert found(spans, MODEL) == []
        assert run.status.description == "loop_error"
        return
    assert found(spans, MODEL) == [
        ("invoke_agent desk", "gen_ai.output.messages"),  # the run's final text: its error
        ("invoke_agent desk", "status"),
    ]


RULES = Rules.from_yaml("rules:\n  - {name: refunds-asked, tool: lookup, decision: ask}\n")


async def test_the_input_the_reply_the_arguments_a_humans_reason_and_a_made_up_tool(capture):
    on, spans = capture
    reply = {
        "text": "reply-marker-1",
        "tool_calls": [
            call("lookup", "c1", order="args-marker-2"),
            call("tool-marker-3", "c2", order="7"),
        ],
    }
    agent = Agent(
        name="desk", model=scripted(reply, "Done."), tools=[lookup], rules=RULES, on_deny="continue"
    )
    human = lambda request: Approval.deny("reason-marker-4", by="ana")  # noqa: E731
    await drive(Session(agent).run("input-marker-5", approver=human))
    expected = {
        "reply-marker-1": [
            ("chat inline", "gen_ai.input.messages"),
            ("chat inline", "gen_ai.output.messages"),
        ],
        "args-marker-2": [
            ("chat inline", "gen_ai.input.messages"),
            ("chat inline", "gen_ai.output.messages"),
            ("execute_tool lookup", "gen_ai.tool.call.arguments"),
        ],
        "tool-marker-3": [
            ("chat inline", "gen_ai.input.messages"),
            ("chat inline", "gen_ai.output.messages"),
            ("execute_tool tool-marker-3", "gen_ai.tool.call.result"),
            ("execute_tool tool-marker-3", "gen_ai.tool.name"),
            ("execute_tool tool-marker-3", "name"),
            ("execute_tool tool-marker-3", "status"),
        ],
        "reason-marker-4": [
            ("chat inline", "gen_ai.input.messages"),
            ("execute_tool lookup", "gen_ai.tool.call.result"),
            ("execute_tool lookup", "loopwright.gate.reason"),
        ],
        "input-marker-5": [
            ("chat inline", "gen_ai.input.messages"),
            ("invoke_agent desk", "gen_ai.input.messages"),
        ],
    }
    assert {m: found(spans, m) for m in expected} == (
        expected if on else {marker: [] for marker in expected}
    )
    [asked] = [s for s in spans.get_finished_spans() if s.name == "execute_tool lookup"]
    gate = {k: v for k, v in (asked.attributes or {}).items() if k.startswith("loopwright.gate")}
    if not on:  # the rule's part of the reason stays: rule names are configuration
        assert gate == {
            "loopwright.gate.decision": "deny",
            "loopwright.gate.reason": "matched rule 'refunds-asked' — human denied […]",
        }
        made_up = [s for s in spans.get_finished_spans() if s.name == "execute_tool"]
        assert len(made_up) == 1 and "gen_ai.tool.name" not in (made_up[0].attributes or {})


@pytest.mark.parametrize(
    "reason, kept",
    [
        ("matched rule 'refunds-asked'", "matched rule 'refunds-asked'"),
        ("no rule matched: default decision 'ask'", "no rule matched: default decision 'ask'"),
        (
            "arguments could not be evaluated for rule 'big': amount 'x-marker' is not a number; "
            "a human decides (the gate fails closed)",
            "arguments could not be evaluated for rule 'big' […]",
        ),
        (
            "matched rule 'r' — human approved, but order: 'x-marker' is not allowed",
            "matched rule 'r' — human approved, but […]",
        ),
        (
            "matched rule 'r' — run ended before a decision",
            "matched rule 'r' — run ended before a decision",
        ),
        ("path /srv/x-marker is outside the workspace", None),  # a custom gate's: content
    ],
)
def test_what_of_a_gates_reason_is_kept_without_capture(reason, kept):
    assert content.gate_reason(reason) == kept


@pytest.mark.parametrize(
    "error, kind",
    [
        ("Tool 'a' failed: ValueError: x-marker", "ValueError"),
        ("Tool 'a' failed: KeyError", "KeyError"),
        ("Tool 'a' failed: x-marker: forged", "tool_error"),  # not a class's name
        ("x-marker", "tool_error"),  # a ToolError's text, a refusal, an invalid call
        (None, "tool_error"),
    ],
)
def test_a_failed_calls_kind(error, kind):
    assert content.error_kind(error) == kind
