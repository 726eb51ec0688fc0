"""OpenTelemetry (docs/telemetry.md): the span trees runs make, content only when opted in,
nothing imported when off, the console exporter from OTEL_TRACES_EXPORTER, and spans sent by
OTLP over HTTP to a receiver on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from conftest import call, drive, scripted
from loopwright import Agent, Approval, ConfigError, Rules, Session, telemetry, tool
from loopwright.project import load_project
from loopwright.subagents import subagent_tool
from loopwright.telemetry import exporters

ROOT = Path(__file__).resolve().parents[1]
CONTENT = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def explode(order: str) -> str:
    """Always fails."""
    raise ValueError(f"no such order {order}")


RULES = Rules.from_yaml("""
rules:
  - {name: refunds-asked, tool: refund, decision: ask}
  - {name: no-explosions, tool: explode, decision: deny}
""")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into memory, content off; off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(provider, capture_content=False)
    yield exporter
    telemetry.disable()
    provider.shutdown()


def tree(exporter: InMemorySpanExporter, *keys: str) -> list[Any]:
    """The finished spans as a tree of (name, {the keys' attributes}, [children]), children in
    the order they started; every span in one trace."""
    finished = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in finished}) == 1
    ids = {s.context.span_id for s in finished}

    def node(span: ReadableSpan) -> Any:
        attributes = span.attributes or {}
        picked = {k: attributes[k] for k in keys if k in attributes}
        kids = [
            s for s in finished if s.parent is not None and s.parent.span_id == span.context.span_id
        ]
        kids.sort(key=lambda s: s.start_time or 0)
        return (span.name, picked, [node(k) for k in kids])

    return [node(s) for s in finished if s.parent is None or s.parent.span_id not in ids]


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_run_with_two_requests_and_one_call(spans):
    model = scripted({"tool_calls": [call("lookup", "c1", order="7")]}, "It shipped.")
    agent = Agent(name="support", model=model, tools=[lookup])
    result = await drive(Session(agent, session_id="s1", tenant="acme").run("where is 7?"))
    used = [e.message.usage for e in result.events if e.type == "message:completed"]
    (in1, out1), (in2, out2) = [(u.input_tokens, u.output_tokens) for u in used]
    keys = (
        "gen_ai.operation.name",
        "gen_ai.agent.name",
        "gen_ai.conversation.id",
        "loopwright.tenant",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.response.finish_reasons",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "loopwright.gate.decision",
        "loopwright.tool.status",
        "loopwright.stop_reason",
    )
    ids = {"gen_ai.conversation.id": "s1", "loopwright.tenant": "acme"}
    chat = {"gen_ai.operation.name": "chat", **ids, "gen_ai.provider.name": "scripted"}
    chat["gen_ai.request.model"] = "inline"
    assert tree(spans, *keys) == [
        (
            "invoke_agent support",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                **ids,
                "gen_ai.usage.input_tokens": in1 + in2,
                "gen_ai.usage.output_tokens": out1 + out2,
                "loopwright.stop_reason": "completed",
            },
            [
                (
                    "chat inline",
                    {
                        **chat,
                        "gen_ai.usage.input_tokens": in1,
                        "gen_ai.usage.output_tokens": out1,
                        "gen_ai.response.finish_reasons": ("tool_call",),
                    },
                    [],
                ),
                (
                    "execute_tool lookup",
                    {
                        "gen_ai.operation.name": "execute_tool",
                        **ids,
                        "gen_ai.tool.name": "lookup",
                        "gen_ai.tool.call.id": "c1",
                        "loopwright.gate.decision": "allow",
                        "loopwright.tool.status": "ok",
                    },
                    [],
                ),
                (
                    "chat inline",
                    {
                        **chat,
                        "gen_ai.usage.input_tokens": in2,
                        "gen_ai.usage.output_tokens": out2,
                        "gen_ai.response.finish_reasons": ("stop",),
                    },
                    [],
                ),
            ],
        )
    ]
    for span in spans.get_finished_spans():
        assert not CONTENT & set(span.attributes or {}), span.name  # content is opt-in
        assert span.status.status_code is StatusCode.UNSET
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
    [run] = by_name(spans, "invoke_agent support")
    assert all(run.start_time <= s.start_time for s in spans.get_finished_spans())  # type: ignore[operator]


GATE = (
    "gen_ai.tool.call.id",
    "loopwright.gate.decision",
    "loopwright.approval.decision",
    "loopwright.approval.by",
    "loopwright.tool.status",
    "error.type",
)


async def test_asked_and_denied_calls(spans):
    model = scripted(
        {"tool_calls": [call("refund", "r1", order="7"), call("explode", "x1", order="7")]},
        "Sorry.",
    )
    tools = [refund, explode]
    agent = Agent(name="support", model=model, tools=tools, rules=RULES, on_deny="continue")
    human = lambda request: Approval.approve(by="ana")  # noqa: E731
    await drive(Session(agent, session_id="s2").run("refund 7", approver=human))
    [(_, _, children)] = tree(spans, *GATE)
    assert [c[:2] for c in children if c[0].startswith("execute_tool")] == [
        (
            "execute_tool refund",
            {
                "gen_ai.tool.call.id": "r1",
                "loopwright.gate.decision": "allow",  # the gate asked; the human approved
                "loopwright.approval.decision": "approve",
                "loopwright.approval.by": "ana",
                "loopwright.tool.status": "ok",
            },
        ),
        (
            "execute_tool explode",
            {
                "gen_ai.tool.call.id": "x1",
                "loopwright.gate.decision": "deny",
                "loopwright.tool.status": "denied",
            },
        ),
    ]
    [denied] = by_name(spans, "execute_tool explode")
    assert (denied.attributes or {})["loopwright.gate.reason"] == "matched rule 'no-explosions'"


async def test_a_call_left_pending_and_its_resumption(spans):
    model = scripted({"tool_calls": [call("refund", "r1", order="7")]}, "Refunded.")
    session = Session(Agent(name="support", model=model, tools=[refund], rules=RULES))
    paused = await drive(session.run("refund 7"))
    assert paused.stop_reason == "paused"
    [(_, run, children)] = tree(spans, *GATE, "loopwright.stop_reason")
    assert run == {"loopwright.stop_reason": "paused"}
    [pending] = [c[:2] for c in children if c[0].startswith("execute_tool")]
    assert pending == (
        "execute_tool refund",
        {
            "gen_ai.tool.call.id": "r1",
            "loopwright.gate.decision": "ask",
            "loopwright.approval.decision": "pending",
            "loopwright.tool.status": "pending",
        },
    )
    spans.clear()
    await session.resolve(session.pending[0].id, Approval.approve(by="bo"))
    await drive(session.resume())
    [(_, run, children)] = tree(spans, *GATE, "loopwright.stop_reason")
    assert run == {"loopwright.stop_reason": "completed"}
    assert [c[:2] for c in children] == [
        (
            "execute_tool refund",
            {
                "gen_ai.tool.call.id": "r1",
                "loopwright.gate.decision": "allow",
                "loopwright.approval.decision": "approve",
                "loopwright.approval.by": "bo",
                "loopwright.tool.status": "ok",
            },
        ),
        ("chat inline", {}),
    ]


async def test_a_tool_error(spans):
    model = scripted({"tool_calls": [call("explode", "x1", order="9")]}, "It failed.")
    agent = Agent(name="support", model=model, tools=[explode])
    result = await drive(Session(agent).run("go"))
    assert result.stop_reason == "completed"
    [failed] = by_name(spans, "execute_tool explode")
    assert {k: (failed.attributes or {}).get(k) for k in GATE[-2:]} == {
        "loopwright.tool.status": "error",
        "error.type": "ValueError",
    }
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "ValueError"  # its text is content: not captured
    [run] = by_name(spans, "invoke_agent support")
    assert run.status.status_code is StatusCode.UNSET  # the model read the error and answered


async def test_a_subagents_run_is_a_child_of_its_parents_call(spans):
    child = Agent(
        name="billing",
        description="Handles refunds.",
        model=scripted({"tool_calls": [call("lookup", "k1", order="7")]}, "Looked."),
        tools=[lookup],
    )
    model = scripted({"tool_calls": [call("billing", "b1", request="check 7")]}, "Done.")
    parent = Agent(name="support", model=model, tools=[subagent_tool(child)])
    await drive(Session(parent, session_id="p1", tenant="acme").run("go"))
    keys = ("gen_ai.conversation.id", "loopwright.tenant", "gen_ai.tool.call.id")
    p1, kid = {"gen_ai.conversation.id": "p1"}, {"gen_ai.conversation.id": "p1/billing/b1"}
    for ids in (p1, kid):
        ids["loopwright.tenant"] = "acme"
    assert tree(spans, *keys) == [
        (
            "invoke_agent support",
            p1,
            [
                ("chat inline", p1, []),
                (
                    "execute_tool billing",
                    {**p1, "gen_ai.tool.call.id": "b1"},
                    [
                        (
                            "invoke_agent billing",
                            kid,
                            [
                                ("chat inline", kid, []),
                                ("execute_tool lookup", {**kid, "gen_ai.tool.call.id": "k1"}, []),
                                ("chat inline", kid, []),
                            ],
                        )
                    ],
                ),
                ("chat inline", p1, []),
            ],
        )
    ]


async def test_content_only_when_opted_in(spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.enable(provider)  # content from the variable
    model = scripted({"tool_calls": [call("lookup", "c1", order="7")]}, "It shipped.")
    await drive(Session(Agent(name="support", model=model, tools=[lookup])).run("where is 7?"))
    [run] = by_name(spans, "invoke_agent support")
    [first, second] = by_name(spans, "chat inline")
    [used] = by_name(spans, "execute_tool lookup")
    user = {"role": "user", "parts": [{"type": "text", "content": "where is 7?"}]}
    asked = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"order": "7"}}],
    }
    answer = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "order 7: shipped"}],
    }
    said = {"role": "assistant", "parts": [{"type": "text", "content": "It shipped."}]}

    def content(span: ReadableSpan) -> dict[str, Any]:
        attributes = span.attributes or {}
        return {k: json.loads(str(attributes[k])) for k in sorted(CONTENT & set(attributes))}

    assert content(run) == {"gen_ai.input.messages": [user], "gen_ai.output.messages": [said]}
    assert content(first) == {
        "gen_ai.input.messages": [user],
        "gen_ai.output.messages": [{**asked, "finish_reason": "tool_call"}],
    }
    assert content(second) == {
        "gen_ai.input.messages": [user, asked, answer],
        "gen_ai.output.messages": [{**said, "finish_reason": "stop"}],
    }
    assert (used.attributes or {})["gen_ai.tool.call.arguments"] == '{"order": "7"}'
    assert (used.attributes or {})["gen_ai.tool.call.result"] == "order 7: shipped"
    provider.shutdown()


async def test_when_off_a_run_makes_no_spans(spans):
    telemetry.disable()
    assert not telemetry.enabled()
    await drive(Session(Agent(model=scripted("hi"))).run("go"))
    assert spans.get_finished_spans() == ()


def test_loopwright_toml_turns_it_on(tmp_path, monkeypatch):
    enabled: list[bool | None] = []
    monkeypatch.setattr(
        telemetry, "enable", lambda capture_content=None: enabled.append(capture_content)
    )
    monkeypatch.delenv("LOOPWRIGHT_OTEL", raising=False)
    toml = tmp_path / "loopwright.toml"
    toml.write_text("[telemetry]\notel = true\ncapture_content = true\n")
    load_project(tmp_path, dotenv=False)
    toml.write_text("[telemetry]\notel = false\n")
    load_project(tmp_path, dotenv=False)
    assert enabled == [True]
    toml.write_text('[telemetry]\notel = "yes"\n')
    bad = r"loopwright.toml:2: \[telemetry\] otel: input should be a valid boolean"
    with pytest.raises(ConfigError, match=bad):
        load_project(tmp_path, dotenv=False)
    toml.write_text("[telemetry]\notle = true\n")
    with pytest.raises(
        ConfigError,
        match=r"loopwright.toml:2: \[telemetry\] unknown key 'otle' \(did you mean 'otel'\?\)",
    ):
        load_project(tmp_path, dotenv=False)


def test_an_exporter_not_installed_is_a_config_error(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,zipkin_json")
    with pytest.raises(ConfigError, match="'zipkin_json', which is not installed"):
        exporters.exporters()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert exporters.exporters() == []


SCRIPT = """
import sys
from loopwright import Agent, run_sync
from loopwright.testing import ScriptedModel
run_sync(Agent(name="support", model=ScriptedModel.from_script(["hello"])), "hi")
print("otel modules:", sorted(m for m in sys.modules if m.startswith("opentelemetry"))[:1])
"""


def _python(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPWRIGHT_OTEL"))}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )


def test_off_nothing_of_opentelemetry_is_imported():
    assert _python().stdout == "otel modules: []\n"


def test_console_exporter_prints_the_spans():
    out = _python(LOOPWRIGHT_OTEL="1", OTEL_TRACES_EXPORTER="console").stdout
    assert out.startswith("otel modules: ['opentelemetry")
    printed = [json.loads(chunk) for chunk in _objects(out[out.index("\n") + 1 :])]
    assert [span["name"] for span in printed] == ["chat inline", "invoke_agent support"]
    chat, run = printed
    assert chat["parent_id"] == run["context"]["span_id"] and run["parent_id"] is None
    assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]


def _objects(text: str) -> list[str]:
    """The JSON objects the console exporter printed one after another."""
    decoder, at, found = json.JSONDecoder(), 0, []
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        end = decoder.raw_decode(text, at)[1]
        found.append(text[at:end])
        at = end
    return found


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each export and notes its span names."""

    names: list[str]
    arrived: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        assert self.path == "/v1/traces"
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.server.names += [s.name for s in scope.spans]  # type: ignore[attr-defined]
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        if any(n.startswith("invoke_agent") for n in self.server.names):  # type: ignore[attr-defined]
            self.server.arrived.set()  # type: ignore[attr-defined]

    def log_message(self, *args: Any) -> None:
        pass


async def test_spans_reach_an_otlp_http_receiver(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.names, server.arrived = [], threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/traces")
    provider = exporters.configured()
    try:
        telemetry.enable(provider)
        model = scripted({"tool_calls": [call("lookup", "c1", order="7")]}, "It shipped.")
        await drive(Session(Agent(name="support", model=model, tools=[lookup])).run("go"))
        assert provider.force_flush(10_000)
        assert server.arrived.wait(10)  # a stuck-guard only: force_flush has sent them
        assert sorted(server.names) == [  # type: ignore[attr-defined]
            "chat inline",
            "chat inline",
            "execute_tool lookup",
            "invoke_agent support",
        ]
    finally:
        telemetry.disable()
        provider.shutdown()
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_failure_in_the_spans_never_ends_the_run(spans, monkeypatch, caplog):
    from loopwright import events as ev
    from loopwright.telemetry import spans as made

    def broken(*args: Any) -> None:
        raise RuntimeError("a bug in telemetry")

    monkeypatch.setitem(made._HANDLERS, ev.MessageCompleted, broken)
    model = scripted({"tool_calls": [call("lookup", "c1", order="7")]}, "It shipped.")
    session = Session(Agent(name="support", model=model, tools=[lookup]), session_id="s9")
    result = await drive(session.run("go"))
    assert result.text == "It shipped." and result.stop_reason == "completed"
    [record] = [r for r in caplog.records if r.name == "loopwright.telemetry"]
    assert record.getMessage() == "telemetry: the spans of run s9 failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "a bug in telemetry"
    [run] = spans.get_finished_spans()  # ended, as failed; no more spans of this run
    assert run.name == "invoke_agent support" and run.status.status_code is StatusCode.ERROR

    spans.clear()
    caplog.clear()
    monkeypatch.setattr(made.RunSpans, "__init__", broken)  # not even its first span
    result = await drive(Session(Agent(model=scripted("hi"))).run("go"))
    assert result.text == "hi" and spans.get_finished_spans() == ()
    [record] = [r for r in caplog.records if r.name == "loopwright.telemetry"]
    assert record.exc_info is not None and str(record.exc_info[1]) == "a bug in telemetry"


async def test_a_subagent_called_again_with_the_same_call_id_is_a_child_of_that_call(spans):
    """A call id used again in a later step (OpenAI's `call_<index>`) gives the child session
    `…/<call id>~2`: its run is still the child of the call that made it."""
    child = Agent(name="billing", description="Handles refunds.", model=scripted("One.", "Two."))
    model = scripted(
        {"tool_calls": [call("billing", "call_0", request="first")]},
        {"tool_calls": [call("billing", "call_0", request="second")]},
        "Done.",
    )
    parent = Agent(name="support", model=model, tools=[subagent_tool(child)])
    await drive(Session(parent, session_id="p1").run("go"))
    runs = [
        (kid[0], kid[1]["gen_ai.conversation.id"])
        for name, _, kids in tree(spans, "gen_ai.conversation.id")[0][2]
        if name == "execute_tool billing"
        for kid in kids
    ]
    assert runs == [
        ("invoke_agent billing", "p1/billing/call_0"),
        ("invoke_agent billing", "p1/billing/call_0~2"),
    ]


async def test_a_subagent_paused_on_an_approval_and_resumed(spans):
    child = Agent(
        name="billing",
        description="Handles refunds.",
        model=scripted({"tool_calls": [call("refund", "k1", order="7")]}, "Refunded."),
        tools=[refund],
        rules=RULES,
    )
    model = scripted({"tool_calls": [call("billing", "b1", request="refund 7")]}, "Done.")
    session = Session(Agent(name="support", model=model, tools=[subagent_tool(child)]))
    assert (await drive(session.run("go"))).stop_reason == "paused"
    keys = ("loopwright.stop_reason", "loopwright.tool.status", "loopwright.approval.decision")
    assert tree(spans, *keys) == [
        (
            "invoke_agent support",
            {"loopwright.stop_reason": "paused"},
            [
                ("chat inline", {}, []),
                (
                    "execute_tool billing",
                    {"loopwright.tool.status": "suspended"},
                    [
                        (
                            "invoke_agent billing",
                            {"loopwright.stop_reason": "paused"},
                            [
                                ("chat inline", {}, []),
                                (
                                    "execute_tool refund",
                                    {
                                        "loopwright.tool.status": "pending",
                                        "loopwright.approval.decision": "pending",
                                    },
                                    [],
                                ),
                            ],
                        )
                    ],
                ),
            ],
        )
    ]
    spans.clear()
    await session.resolve(session.pending[0].id, Approval.approve(by="bo"))
    assert (await drive(session.resume())).stop_reason == "completed"
    assert tree(spans, *keys) == [
        (
            "invoke_agent support",
            {"loopwright.stop_reason": "completed"},
            [
                (
                    "execute_tool billing",
                    {"loopwright.tool.status": "ok"},
                    [
                        (
                            "invoke_agent billing",
                            {"loopwright.stop_reason": "completed"},
                            [
                                (
                                    "execute_tool refund",
                                    {
                                        "loopwright.tool.status": "ok",
                                        "loopwright.approval.decision": "approve",
                                    },
                                    [],
                                ),
                                ("chat inline", {}, []),
                            ],
                        )
                    ],
                ),
                ("chat inline", {}, []),
            ],
        )
    ]


async def test_a_cut_answer_ends_the_run_span_max_tokens(spans):
    """The run's span says `max_tokens`, its request's finish reason `length`; not an error."""
    model = scripted({"text": "It ship", "stop_reason": "max_tokens"})
    agent = Agent(name="support", model=model)
    await drive(Session(agent, session_id="s1").run("where is 7?"))
    keys = ("gen_ai.response.finish_reasons", "loopwright.stop_reason")
    assert tree(spans, *keys) == [
        (
            "invoke_agent support",
            {"loopwright.stop_reason": "max_tokens"},
            [("chat inline", {"gen_ai.response.finish_reasons": ("length",)}, [])],
        )
    ]
    [run] = by_name(spans, "invoke_agent support")
    assert run.status.status_code == StatusCode.UNSET
