"""AG-UI (issue 36, item 4): `POST /agents/{name}/agui` against a real server on loopback, every
frame validated by ag-ui-protocol's own models (the discriminated `Event` union), the exact
sequence of event types asserted: a text run, a run with a tool call, a run paused on an
approval (AG-UI's interrupt outcome), its decision in the next RunAgentInput's `resume`, and the
continuation. Then bad input, unknown agents and interrupts, tenancy, the route without the
extra, and the translation on its own (no HTTP)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

import loopwright.server
from live_server import LiveServer, make_project, serving, write
from loopwright import events as ev
from loopwright.messages import AssistantMessage, Text, ToolCall, Usage
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.server.agui_events import Translation

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
T = EventType

CLERK = {  # an agent whose tool the rules allow: a tool call runs without asking
    "agent.py": '''\
        from pathlib import Path

        from loopwright import Agent, tool
        from loopwright.messages import ToolCall, ToolResultMessage, Usage
        from loopwright.testing import FunctionModel, Reply


        @tool
        def lookup(order: str) -> str:
            """Look an order up.

            Args:
                order: The order's id.
            """
            return f"{order}: shipped"


        def reply(request):
            last = request.messages[-1]
            used = Usage(input_tokens=10, output_tokens=4)
            if isinstance(last, ToolResultMessage):
                return Reply(text="It shipped.", usage=used)
            call = ToolCall(id="c1", name="lookup", args={"order": "A-1"})
            return Reply(tool_calls=(call,), usage=used)


        agent = Agent(name="clerk", model=FunctionModel(reply), tools=[lookup],
                      rules=Path(__file__).with_name("rules.yaml"))
        ''',
    "rules.yaml": "rules: [{name: look, tool: lookup, decision: allow}]\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = make_project(tmp_path_factory.mktemp("agui") / "shop")
    write(root / "agents" / "clerk", CLERK)
    with LiveServer(create_app(load_project(root))) as live:
        yield live


def run_input(thread: str, run: str, text: str | None = None, **more: Any) -> dict[str, Any]:
    messages = [{"id": f"{run}-u", "role": "user", "content": text}] if text else []
    return {"threadId": thread, "runId": run, "messages": messages, **more}


def agui(client: httpx.Client, agent: str, body: dict[str, Any]) -> list[Any]:
    """POST a RunAgentInput; every SSE frame, validated by ag_ui's Event union."""
    with client.stream("POST", f"/agents/{agent}/agui", json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    frames = [f for f in raw.split("\n\n") if f]
    assert all(f.startswith("data: ") and "\n" not in f for f in frames), raw
    return [EVENTS.validate_json(f.removeprefix("data: ")) for f in frames]


def types(events: list[Any]) -> list[EventType]:
    return [e.type for e in events]


def test_a_text_run(http: httpx.Client) -> None:
    events = agui(http, "shop", run_input("t-text", "r1", "hello"))
    assert types(events) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.STATE_SNAPSHOT,
        T.RUN_FINISHED,
    ]
    started, start, content, end, snapshot, finished = events
    assert (started.thread_id, started.run_id, started.protocol_version) == ("t-text", "r1", "1.0")
    assert start.message_id == content.message_id == end.message_id == "r1:message:1"
    assert (start.role, content.delta) == ("assistant", "heard: hello")
    assert snapshot.snapshot["sessionId"] == "t-text"
    assert (snapshot.snapshot["stopReason"], snapshot.snapshot["pending"]) == ("completed", [])
    assert (finished.result, finished.outcome.type) == ("heard: hello", "success")
    history = http.get("/agents/shop/sessions/t-text").json()  # threadId is the session id
    assert history["status"] == "idle"


def test_a_run_with_a_tool_call(http: httpx.Client) -> None:
    events = agui(http, "clerk", run_input("t-tool", "r1", "where is A-1?"))
    assert types(events) == [
        T.RUN_STARTED,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.STATE_SNAPSHOT,
        T.RUN_FINISHED,
    ]
    _, start, args, end, result, text, _, _, snapshot, finished = events
    assert (start.tool_call_id, start.tool_call_name) == ("c1", "lookup")
    assert start.parent_message_id == "r1:message:1"
    assert json.loads(args.delta) == {"order": "A-1"}
    assert end.tool_call_id == result.tool_call_id == "c1"
    assert (result.content, result.role) == ("A-1: shipped", "tool")
    assert text.message_id == "r1:message:2"
    assert snapshot.snapshot["usage"] == {"inputTokens": 20, "outputTokens": 8}
    assert finished.result == "It shipped."
    usage = finished.usage[0]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (20, 8, 28)


def test_an_approval_is_an_interrupt_its_decision_a_resume_and_the_run_goes_on(
    http: httpx.Client,
) -> None:
    first = agui(http, "shop", run_input("t-refund", "r1", "refund A-1"))
    assert types(first) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.STATE_SNAPSHOT,
        T.RUN_FINISHED,
    ]
    call = first[4].tool_call_id
    assert json.loads(first[5].delta + first[6].delta) == {"order": "A-1", "amount": 5}
    finished = first[-1]
    assert finished.outcome.type == "interrupt"
    (interrupt,) = finished.outcome.interrupts
    assert (interrupt.reason, interrupt.tool_call_id) == ("tool_approval", call)
    assert interrupt.response_schema["required"] == ["approved"]
    assert first[-2].snapshot["pending"] == [
        {"id": interrupt.id, "kind": "approval", "tool": "refund", "toolCallId": call}
    ]
    # the item is ours too: listed by the approval routes, the session paused on it
    listed = http.get("/agents/shop/sessions/t-refund/approvals").json()
    assert [item["id"] for item in listed["approvals"]] == [interrupt.id]
    # a new message without `resume` is refused while the interrupt is open
    refused = http.post("/agents/shop/agui", json=run_input("t-refund", "r2", "hello"))
    assert refused.status_code == 409

    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    second = agui(http, "shop", run_input("t-refund", "r2", resume=resume))
    assert types(second) == [
        T.RUN_STARTED,
        T.TOOL_CALL_RESULT,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.STATE_SNAPSHOT,
        T.RUN_FINISHED,
    ]
    assert (second[1].tool_call_id, second[1].content) == (call, "refunded 5 on A-1")
    assert second[3].delta + second[4].delta == "Done: refunded 5 on A-1"
    assert (second[-1].outcome.type, second[-1].result) == ("success", "Done: refunded 5 on A-1")
    stored = http.get("/agents/shop/sessions/t-refund/events").json()["events"]
    (decided,) = [e["event"] for e in stored if e["event"]["type"] == "pending:decided"]
    assert (decided["id"], decided["status"], decided["by"]) == (
        interrupt.id,
        "approved",
        "loopback",
    )


def test_a_denial_and_a_question_answered_through_resume(http: httpx.Client) -> None:
    first = agui(http, "shop", run_input("t-deny", "r1", "refund A-1"))
    (item,) = first[-1].outcome.interrupts
    deny = {"interruptId": item.id, "status": "resolved", "payload": {"approved": False}}
    second = agui(http, "shop", run_input("t-deny", "r2", resume=[deny]))
    assert second[1].type == T.TOOL_CALL_RESULT and second[1].content.startswith("Tool call denied")
    assert second[-1].outcome.type == "success"

    asked = agui(http, "shop", run_input("t-ask", "r1", "ask me"))
    (question,) = asked[-1].outcome.interrupts
    assert (question.reason, question.message) == ("question", "Which colour?")
    answer = {"interruptId": question.id, "status": "resolved", "payload": {"answer": "blue"}}
    answered = agui(http, "shop", run_input("t-ask", "r2", resume=[answer]))
    assert types(answered)[:2] == [T.RUN_STARTED, T.TOOL_CALL_RESULT]
    assert answered[1].content == "blue"
    assert answered[-1].result == "Done: blue"


def test_interrupts_answered_one_at_a_time(http: httpx.Client) -> None:
    first = agui(http, "shop", run_input("t-two", "r1", "two refunds"))
    a, b = first[-1].outcome.interrupts
    assert (a.tool_call_id, b.tool_call_id) == ("a1", "b1")
    yes = {"status": "resolved", "payload": {"approved": True}}
    half = agui(http, "shop", run_input("t-two", "r2", resume=[{"interruptId": a.id, **yes}]))
    assert types(half) == [T.RUN_STARTED, T.STATE_SNAPSHOT, T.RUN_FINISHED]
    assert [i.id for i in half[-1].outcome.interrupts] == [b.id]  # what is left
    rest = agui(http, "shop", run_input("t-two", "r3", resume=[{"interruptId": b.id, **yes}]))
    results = [(e.tool_call_id, e.content) for e in rest if e.type == T.TOOL_CALL_RESULT]
    assert results == [("a1", "refunded 5 on A-1"), ("b1", "refunded 7 on B-2")]
    assert rest[-1].result == "Done: refunded 5 on A-1; refunded 7 on B-2"


def test_bad_input_unknown_agents_and_interrupts(http: httpx.Client) -> None:
    bad = http.post("/agents/shop/agui", json={"threadId": "t", "messages": "hi"})
    assert bad.status_code == 422
    body = bad.json()
    assert body["error"] == "the body is not an AG-UI RunAgentInput"
    assert sorted((d["loc"][0], d["type"]) for d in body["details"]) == [
        ("messages", "list_type"),
        ("runId", "missing"),
    ]
    unknown = http.post("/agents/nobody/agui", json=run_input("t", "r", "hi"))
    assert (unknown.status_code, unknown.json()) == (404, {"error": "unknown agent 'nobody'"})
    nothing = http.post("/agents/shop/agui", json=run_input("t-none", "r"))
    assert nothing.status_code == 422
    assert nothing.json()["error"].startswith("the last message must be the user's new message")
    resume = [{"interruptId": "nope", "status": "resolved", "payload": {"approved": True}}]
    stray = http.post("/agents/shop/agui", json=run_input("t-none", "r", resume=resume))
    assert stray.status_code == 404
    assert stray.json() == {"error": "no open interrupt 'nope' on this thread"}

    first = agui(http, "shop", run_input("t-payload", "r1", "refund A-1"))
    (item,) = first[-1].outcome.interrupts
    odd = [{"interruptId": item.id, "status": "resolved", "payload": "yes"}]
    refused = http.post("/agents/shop/agui", json=run_input("t-payload", "r2", resume=odd))
    assert refused.status_code == 422
    assert "{'approved': true|false}" in refused.json()["error"]
    listed = http.get("/agents/shop/sessions/t-payload/approvals").json()["approvals"]
    assert [i["id"] for i in listed] == [item.id]  # still open: nothing was recorded


def test_a_long_silence_keeps_the_stream_open_with_comment_lines(tmp_path: Any) -> None:
    with serving(tmp_path / "shop", keepalive=0.01) as live, live.client() as client:
        with live.hold("hold me") as release:
            body = run_input("t-held", "r1", "hold me")
            with client.stream("POST", "/agents/shop/agui", json=body) as response:
                lines = response.iter_lines()
                seen = [next(lines)]  # RUN_STARTED, then silence while the reply is held
                while (line := next(lines)) != ": keep-alive":
                    seen.append(line)
                release()
                rest = [line for line in lines if line and line != ": keep-alive"]
        frames = [f for f in [*seen, *rest] if f]
        events = [EVENTS.validate_json(f.removeprefix("data: ")) for f in frames]
        assert types(events)[0] == T.RUN_STARTED and types(events)[-1] == T.RUN_FINISHED
        assert events[-1].result == "heard: hold me"


ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"
TOKENS = f'[auth.tokens]\n"{ACME}" = "acme"\n"{GLOBEX}" = "globex"\n'


def test_tenancy_as_the_other_run_routes(tmp_path: Any) -> None:
    with serving(tmp_path / "shop", TOKENS) as live:
        with live.client() as anonymous:
            response = anonymous.post("/agents/shop/agui", json=run_input("t", "r", "hi"))
            assert response.status_code == 401
        acme = live.client(headers={"Authorization": f"Bearer {ACME}"})
        globex = live.client(headers={"Authorization": f"Bearer {GLOBEX}"})
        with acme, globex:
            first = agui(acme, "shop", run_input("same", "r1", "refund A-1"))
            (item,) = first[-1].outcome.interrupts
            resume = [{"interruptId": item.id, "status": "resolved", "payload": {"approved": True}}]
            foreign = globex.post("/agents/shop/agui", json=run_input("same", "r2", resume=resume))
            assert foreign.status_code == 404  # another tenant's interrupt is an unknown one
            # the same thread id under another tenant is another session
            theirs = agui(globex, "shop", run_input("same", "r1", "hello"))
            assert theirs[-1].result == "heard: hello"
            ours = acme.get("/agents/shop/sessions/same").json()
            assert (ours["status"], [p["id"] for p in ours["pending"]]) == ("paused", [item.id])
            resumed = agui(acme, "shop", run_input("same", "r2", resume=resume))
            assert resumed[-1].result == "Done: refunded 5 on A-1"


def test_without_the_extra_the_route_says_how_to_get_it(
    server: LiveServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ag_ui", None)  # (the server runs in this process)
    monkeypatch.setitem(sys.modules, "ag_ui.core", None)
    monkeypatch.delitem(sys.modules, "loopwright.server.agui_events")
    monkeypatch.delattr(loopwright.server, "agui_events")
    response = http.post("/agents/shop/agui", json=run_input("t-x", "r", "hi"))
    assert (response.status_code, response.json()) == (
        501,
        {"error": "AG-UI needs the agui extra: pip install 'loopwright[agui]'"},
    )
    assert http.get("/health").status_code == 200


def test_the_server_does_not_import_ag_ui_until_the_route_is_used(tmp_path: Any) -> None:
    import subprocess

    root = make_project(tmp_path / "shop")
    code = (
        "import sys; from loopwright.project import load_project; "
        "from loopwright.server import create_app; "
        f"create_app(load_project({str(root)!r})); "
        "print(sorted(m for m in sys.modules if m.startswith('ag_ui')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_openapi_document_has_the_route(http: httpx.Client) -> None:
    operation = http.get("/openapi.json").json()["paths"]["/agents/{name}/agui"]["post"]
    assert operation["operationId"] == "post-agents-name-agui"
    assert operation["tags"] == ["Runs"]
    assert {"200", "404", "422", "501"} <= set(operation["responses"])


# ---- the translation on its own ----------------------------------------------------------------


def test_a_reply_that_did_not_stream_is_sent_whole_and_a_failed_run_is_a_run_error() -> None:
    t = Translation("s", "r")
    message = AssistantMessage(
        parts=(Text(text="Looking."), ToolCall(id="c", name="find", args={"q": 1})),
        usage=Usage(input_tokens=3, output_tokens=2),
        model="scripted:x",
    )
    out = [*t.started(), *t.event(ev.MessageCompleted(message=message))]
    out += t.event(ev.LoopError(error="model down"))
    out += t.ended(ev.Done(text="", stop_reason="error"), [])
    for event in out:  # (each one, as the encoder writes it, is a valid AG-UI event)
        EVENTS.validate_json(event.model_dump_json(by_alias=True))
    assert types(out) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.STATE_SNAPSHOT,
        T.RUN_ERROR,
    ]
    assert (out[2].delta, out[5].delta) == ("Looking.", '{"q":1}')
    assert (out[-1].message, out[-1].code) == ("model down", "run_failed")


def test_a_cancelled_run_and_a_run_cut_mid_reply() -> None:
    t = Translation("s", "r")
    out = [*t.started(), *t.event(ev.TextDelta(delta="par"))]
    out += t.ended(ev.Done(text="", stop_reason="aborted"), [])
    assert types(out) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,  # (closed: a front end never keeps a message open)
        T.STATE_SNAPSHOT,
        T.RUN_FINISHED,
    ]
    assert out[-1].outcome.type == "cancelled"
    gone = Translation("s", "r").ended(None, [], "the run was taken over elsewhere")
    assert types(gone) == [T.STATE_SNAPSHOT, T.RUN_ERROR]
    assert gone[-1].message == "the run was taken over elsewhere"
