"""The Anthropic provider against aimock (a faithful local fake of the Messages API) and, where
aimock cannot produce the wire we need (an `error` event mid-stream, malformed tool JSON), an
in-process transport replaying hand-written SSE in the real format. Runs go through `Session`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from aimock import aimock, chaos, journal
from conftest import call, drive, scripted, verify
from local_api import Answer, LocalAPI
from loopwright import Agent, ConfigError, RetryPolicy, Session, get_model, tool
from loopwright.events import MessageCompleted, ModelRetry, StepFinished
from loopwright.loop.session import RunResult
from loopwright.messages import (
    AssistantMessage,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from loopwright.models import Model, ModelFailure, ModelRequest, StreamItem
from loopwright.providers import Endpoint, make_model
from loopwright.testing import types
from virtual_time import virtual

pytestmark = [
    # The SDK deprecates claude-sonnet-4-5 (end of life 2026-11-30) with a DeprecationWarning on
    # every request; the catalog prices it, so these tests keep it and silence just that warning.
    pytest.mark.filterwarnings(r"ignore:The model 'claude-sonnet-4-5' is deprecated"),
]

MODEL = "claude-sonnet-4-5"
KEY_ENV = "TEST_ANTHROPIC_KEY"
FAST = RetryPolicy(attempts=2, backoff=0.01)
ASK = "what time is it"
LEG1 = {"userMessage": ASK, "hasToolResult": False}
LEG2 = {"userMessage": ASK, "hasToolResult": True}
ANSWER = "It is 12:00 UTC."
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
CLOCK_CALL = {"toolCalls": [{"name": "clock", "arguments": {"tz": "UTC"}}]}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key")


@pytest.fixture
def ran() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def clock(ran: list[dict[str, Any]]) -> Any:
    @tool
    async def clock(tz: str) -> str:  # (async: on the event loop, as virtual time needs)
        """The current time in a timezone."""
        ran.append({"tz": tz})
        return "12:00"

    return clock


def recording() -> tuple[httpx2.AsyncClient, list[dict[str, Any]]]:
    """An HTTP client that keeps the JSON body of every request (aimock journals a converted
    form without cache_control or thinking blocks)."""
    sent: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        sent.append(json.loads(request.content))

    return httpx2.AsyncClient(event_hooks={"request": [keep]}), sent


def model_at(url: str, *, timeout: float = 10.0, **options: Any) -> Any:
    endpoint = Endpoint(
        name="anthropic", dialect="anthropic", base_url=url, api_key_env=KEY_ENV, timeout=timeout
    )
    return make_model(endpoint, MODEL, **options)


async def run_with(model: Model, *tools: Any, text: str = ASK) -> RunResult:
    agent = Agent(model=model, tools=tools, instructions="You tell the time.", retry=FAST)
    try:
        return await drive(Session(agent).run(text))
    finally:
        await close(model)


async def collect(model: Model, request: ModelRequest) -> list[StreamItem]:
    try:
        return [item async for item in model.stream(request)]
    finally:
        await close(model)


async def close(model: Any) -> None:
    """The model's pool, and the HTTP client a test gave it (its owner closes it)."""
    if not hasattr(model, "aclose"):
        return  # a scripted model
    await model.aclose()
    if model.http_client is not None:
        await model.http_client.aclose()


def collapse(names: list[str]) -> list[str]:
    """Event types with each run of one delta type folded into one (chunking differs)."""
    return [
        n for i, n in enumerate(names) if not (n.endswith(":delta") and names[i - 1 : i] == [n])
    ]


def of(result: RunResult, kind: type) -> list[Any]:
    return [e for e in result.events if isinstance(e, kind)]


# -- a hand-written Messages API stream for what aimock cannot send ---------------------------


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def reply(
    *blocks: tuple[str, dict[str, Any], list[dict[str, Any]]],
    stop: str = "end_turn",
    usage: dict[str, int] | None = None,
    end: bool = True,
) -> list[dict[str, Any]]:
    """message_start, each (kind, start, deltas) block, message_delta, message_stop."""
    start = {"input_tokens": 10, "output_tokens": 1, **(usage or {})}
    message = dict(id="msg_1", type="message", role="assistant", content=[], usage=start)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for i, (kind, first, deltas) in enumerate(blocks):
        events.append(
            {"type": "content_block_start", "index": i, "content_block": {"type": kind, **first}}
        )
        events += [{"type": "content_block_delta", "index": i, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}}
    )
    return [*events, {"type": "message_stop"}] if end else events


def thinking(text: str, signature: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    deltas = [{"type": "thinking_delta", "thinking": text}]
    return (
        "thinking",
        {"thinking": "", "signature": ""},
        [*deltas, {"type": "signature_delta", "signature": signature}],
    )


def text(*pieces: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    return ("text", {"text": ""}, [{"type": "text_delta", "text": p} for p in pieces])


def tool_use(name: str, *pieces: str, id: str = "toolu_1") -> tuple[str, dict[str, Any], list]:
    deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    return ("tool_use", {"id": id, "name": name, "input": {}}, deltas)


def fake(
    *bodies: bytes, arrived: asyncio.Event | None = None
) -> tuple[httpx2.AsyncClient, list[dict[str, Any]]]:
    """A client whose n-th request gets the n-th SSE body (with `arrived`: never; the event
    is set when the request is at the server)."""
    sent: list[dict[str, Any]] = []

    async def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        if arrived is not None:
            arrived.set()
            await asyncio.Event().wait()
        body = bodies[len(sent) - 1]
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle)), sent


def turn(role: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(content)}


def said(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def use(id: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "clock", "input": args}


def answer(id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}


# -- a real run --------------------------------------------------------------------------------


async def test_tool_run_end_to_end(tmp_path: Path, clock: Any, ran: list[dict[str, Any]]):
    leg1 = {**CLOCK_CALL, "usage": {"input_tokens": 1200, "output_tokens": 40}}
    fixtures = [{"match": LEG1, "response": leg1}, {"match": LEG2, "response": {"content": ANSWER}}]
    with aimock(tmp_path, fixtures) as url:
        client, sent = recording()
        result = await run_with(model_at(url, http_client=client), clock)
        entries = journal(url)
    assert (result.stop_reason, result.text, ran) == ("completed", ANSWER, [{"tz": "UTC"}])
    first = of(result, MessageCompleted)[0].message
    assert first.usage == Usage(input_tokens=1200, output_tokens=40, cost=0.0042)
    assert first.model == f"anthropic:{MODEL}"
    (call_id,) = [c.id for c in first.tool_calls]
    same = scripted({"tool_calls": [call("clock", tz="UTC")]}, ANSWER)
    expected = await run_with(same, clock)
    assert collapse(types(result.events)) == collapse(types(expected.events))
    # what aimock understood the second request to be
    second = entries[1]["body"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][0]["content"] == "You tell the time."
    assert second["messages"][2]["tool_calls"][0]["id"] == call_id
    assert second["messages"][3]["tool_call_id"] == call_id
    assert [t["function"]["name"] for t in second["tools"]] == ["clock"]
    # and the exact wire: tool_result in a user message right after the tool_use, caching marks
    cached = {"type": "ephemeral"}
    assert sent[1]["messages"][1:] == [
        turn("assistant", use(call_id, tz="UTC")),
        turn("user", answer(call_id, "12:00")),
    ]
    assert sent[1]["system"] == [{**said("You tell the time."), "cache_control": cached}]
    assert sent[1]["tools"][-1]["cache_control"] == cached
    assert sent[1]["max_tokens"] == 64_000  # the catalog's output limit for the model


async def test_thinking_and_its_signature_round_trip(tmp_path: Path, clock: Any):
    leg1 = {**CLOCK_CALL, "reasoning": "The user wants the time.", "reasoningSignature": "sig-9"}
    fixtures = [{"match": LEG1, "response": leg1}, {"match": LEG2, "response": {"content": ANSWER}}]
    with aimock(tmp_path, fixtures) as url:
        client, sent = recording()
        result = await run_with(model_at(url, http_client=client), clock)
    assert result.stop_reason == "completed"
    first = of(result, MessageCompleted)[0].message
    assert first.parts[0] == Thinking(text="The user wants the time.", signature="sig-9")
    assert "thinking:delta" in types(result.events)
    signed = {"type": "thinking", "thinking": "The user wants the time.", "signature": "sig-9"}
    assert sent[1]["messages"][1]["content"][0] == signed


async def test_history_becomes_alternating_turns_with_notes_last():
    client, sent = fake(sse(*reply(text("ok"))))
    history = [
        UserMessage(content="hi"),
        AssistantMessage(
            parts=(
                Thinking(text="unsigned, from another provider"),
                Text(text="Looking."),
                ToolCall(id="a", name="clock", args={"tz": "UTC"}),
                ToolCall(id="b", name="clock", args={"tz": "CET"}),
            ),
            stop_reason="tool_use",
        ),
        ToolResultMessage(call_id="a", tool="clock", content="12:00"),
        ToolResultMessage(call_id="b", tool="clock", content="boom", is_error=True),
        UserMessage(content="also, hurry"),
    ]
    request = ModelRequest(
        system="", messages=history, notes=("[budget note]",), max_output_tokens=100
    )
    items = await collect(model_at("http://fake", http_client=client), request)
    assert isinstance(items[-1], MessageCompleted)
    assert sent[0]["max_tokens"] == 100 and "system" not in sent[0] and "tools" not in sent[0]
    assert sent[0]["messages"] == [
        turn("user", said("hi")),
        turn("assistant", said("Looking."), use("a", tz="UTC"), use("b", tz="CET")),
        turn(
            "user",
            answer("a", "12:00"),
            answer("b", "boom", True),
            said("also, hurry"),
            said("[budget note]"),
        ),
    ]


async def test_stream_maps_deltas_usage_and_stop_reason():
    body = sse(
        *reply(
            thinking("hmm", "sig"),
            text("Hel", "lo"),
            tool_use("clock", '{"tz": "U', 'TC"}'),
            stop="pause_turn",
            usage=dict(
                input_tokens=100, cache_read_input_tokens=1000, cache_creation_input_tokens=200
            ),
        )
    )
    client, _ = fake(body)
    request = ModelRequest(system="s", messages=[UserMessage(content="hi")])
    items = await collect(model_at("http://fake", http_client=client), request)
    assert [getattr(i, "partial_args", None) for i in items[3:5]] == [{"tz": "U"}, {"tz": "UTC"}]
    assert types(items) == [
        "thinking:delta",
        "text:delta",
        "text:delta",
        "tool:delta",
        "tool:delta",
        "message:completed",
    ]
    message = items[-1].message  # type: ignore[union-attr]
    assert message.parts == (
        Thinking(text="hmm", signature="sig"),
        Text(text="Hello"),
        ToolCall(id="toolu_1", name="clock", args={"tz": "UTC"}),
    )
    assert message.stop_reason == "end_turn"  # pause_turn and other reasons end the turn
    # input counts everything read; cost: 100 plain + 1000 cached reads + 200 cache writes + 7 out
    counts = dict(
        input_tokens=1300, output_tokens=7, cache_read_tokens=1000, cache_write_tokens=200
    )
    assert message.usage == Usage(**counts, cost=0.001455)


# -- failures are data, retried within the bound ---------------------------------------------


@pytest.mark.parametrize(
    ("events", "error"),
    [
        (reply(text("Hel"), end=False), "the stream ended before the reply was complete"),
        ([*reply(text("Hel"))[:3], OVERLOADED], "overloaded_error"),
    ],
    ids=["no-message-stop", "error-event"],
)
async def test_broken_streams_end_in_one_retryable_failure(events: list[Any], error: str):
    client, _ = fake(sse(*events))
    request = ModelRequest(system="", messages=[UserMessage(content="hi")])
    items = await collect(model_at("http://fake", http_client=client), request)
    failure = items[-1]
    assert isinstance(failure, ModelFailure) and failure.retryable and error in failure.error
    assert not any(isinstance(i, (ModelFailure, MessageCompleted)) for i in items[:-1])


async def test_a_reply_streaming_past_the_bound_is_stopped(monkeypatch):
    """P10: what a reply streams is bounded on our side, not only by the request's deadline."""
    from loopwright.providers import _bounds

    monkeypatch.setattr(_bounds, "MAX_REPLY_CHARS", 10)
    client, _ = fake(sse(*reply(text("four", "five!", "and more"))))
    request = ModelRequest(system="", messages=[UserMessage(content="hi")])
    items = await collect(model_at("http://fake", http_client=client), request)
    assert [getattr(i, "delta", None) for i in items[:-1]] == ["four", "five!"]
    assert items[-1] == ModelFailure(
        error="the reply streamed over 10 characters: stopped", retryable=False
    )


async def test_an_error_event_no_retry_can_help_is_not_retried():
    denied = {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
    client, _ = fake(sse(*reply(text("Hel"))[:3], denied))
    request = ModelRequest(system="", messages=[UserMessage(content="hi")])
    failure = (await collect(model_at("http://fake", http_client=client), request))[-1]
    assert isinstance(failure, ModelFailure)
    assert (failure.retryable, failure.error) == (
        False,
        "authentication_error in the stream: bad key",
    )


@pytest.mark.parametrize("wire", ['{"tz": "UTC"', "[1]"], ids=["not-json", "not-an-object"])
async def test_malformed_tool_json_is_answered_and_the_model_corrects(
    clock: Any, ran: list, wire: str
):
    """Issue 31, finding 15: an error result the model reads, not a retry of the same request."""
    bad = sse(*reply(tool_use("clock", wire), stop="tool_use"))
    good = sse(*reply(tool_use("clock", '{"tz": "UTC"}'), stop="tool_use"))
    client, sent = fake(bad, good, sse(*reply(text(ANSWER))))
    result = await run_with(model_at("http://fake", http_client=client), clock)
    assert (result.stop_reason, ran, len(sent)) == ("completed", [{"tz": "UTC"}], 3)
    assert of(result, ModelRetry) == []
    answered = sent[1]["messages"][-1]["content"][0]
    assert answered["is_error"] and "the arguments are not a JSON object" in str(answered)
    steps = of(result, StepFinished)
    assert len(steps) == 3 and all(s.usage is not None for s in steps)  # each request's usage


async def test_error_event_mid_reply_is_retried_with_the_partial_text_as_a_note():
    client, sent = fake(sse(*reply(text("It is"))[:3], OVERLOADED), sse(*reply(text(ANSWER))))
    result = await run_with(model_at("http://fake", http_client=client))
    assert (result.stop_reason, result.text) == ("completed", ANSWER)
    note = "[Your previous attempt was cut off after: It is]"
    assert sent[1]["messages"] == [turn("user", said(ASK), said(note))]


async def test_rate_limit_honours_retry_after(tmp_path: Path, clock: Any, ran: list):
    error = {"type": "rate_limit_error", "message": "slow down"}
    limited = {"error": error, "status": 429, "retryAfter": 1}
    fixtures = [
        {"match": {**LEG1, "sequenceIndex": 0}, "response": limited},
        {"match": {**LEG1, "sequenceIndex": 1}, "response": CLOCK_CALL},
        {"match": LEG2, "response": {"content": ANSWER}},
    ]
    with aimock(tmp_path, fixtures) as url:
        result = await run_with(model_at(url), clock)
        statuses = [e["response"]["status"] for e in journal(url)]
    assert (result.stop_reason, ran, statuses) == ("completed", [{"tz": "UTC"}], [429, 200, 200])
    assert [(r.delay, "429" in r.error) for r in of(result, ModelRetry)] == [(1.0, True)]


async def test_overloaded_and_server_errors_are_retried(tmp_path: Path, clock: Any, ran: list):
    def failing(status: int, kind: str) -> dict[str, Any]:
        return {"error": {"type": kind, "message": "try later"}, "status": status}

    fixtures = [
        {"match": {**LEG1, "sequenceIndex": 0}, "response": failing(529, "overloaded_error")},
        {"match": {**LEG1, "sequenceIndex": 1}, "response": failing(500, "api_error")},
        {"match": {**LEG1, "sequenceIndex": 2}, "response": CLOCK_CALL},
        {"match": LEG2, "response": {"content": ANSWER}},
    ]
    with aimock(tmp_path, fixtures) as url:
        result = await run_with(model_at(url), clock)
    assert (result.stop_reason, ran) == ("completed", [{"tz": "UTC"}])
    assert [r.error[:8] for r in of(result, ModelRetry)] == ["HTTP 529", "HTTP 500"]


@virtual
async def test_stream_cut_mid_tool_call_is_retried(tmp_path: Path, clock: Any, ran: list):
    """The first attempt's connection is cut inside the tool call's arguments, once the loop
    has emitted a tool delta (the test cuts it on seeing one)."""
    cut = asyncio.Event()
    tool_call = sse(*reply(tool_use("clock", '{"tz": ', '"UTC"}'), stop="tool_use"))
    answers = [Answer(tool_call[: tool_call.index(b'"UTC')], then=cut), Answer(tool_call)]
    async with LocalAPI(tmp_path, [*answers, Answer(sse(*reply(text(ANSWER))))]) as api:
        model = model_at("http://api", http_client=api.client())
        agent = Agent(model=model, tools=[clock], retry=FAST)
        events = []
        async with Session(agent).run(ASK) as run:
            async for event in run:
                events.append(event)
                if event.type == "tool:delta":
                    cut.set()
        await close(model)
    verify(events)
    names = types(events)
    assert names.index("tool:delta") < names.index("model:retry")  # cut after a tool delta
    [retry] = [e for e in events if e.type == "model:retry"]
    # (the cause, whichever layer names it: httpx, or the SDK wrapping it in APIConnectionError)
    assert "peer closed connection" in retry.error, retry.error
    assert events[-1].stop_reason == "completed"
    assert (ran, len(api.requests)) == ([{"tz": "UTC"}], 3)


async def test_stalled_stream_fails_past_the_bound(tmp_path: Path, clock: Any, ran: list):
    """aimock holds every request 30 s (its most): only the 0.5 s timeout can end them."""
    fixtures = [{"match": LEG1, "response": CLOCK_CALL}]
    with aimock(tmp_path, fixtures, extra=("--chaos-latency", "30000")) as url:
        result = await run_with(model_at(url, timeout=0.5), clock)
    assert (result.stop_reason, ran, len(of(result, ModelRetry))) == ("error", [], 2)
    assert types(result.events)[-2:] == ["loop:error", "done"]
    assert "timed out" in result.events[-2].error


async def test_garbage_responses_fail_past_the_bound(tmp_path: Path, clock: Any, ran: list):
    with aimock(tmp_path, [{"match": LEG1, "response": CLOCK_CALL}]) as url:
        chaos(url, malformedRate=1.0)  # 200 with a body that is not an event stream
        result = await run_with(model_at(url), clock)
        requests = len(journal(url))
    assert (result.stop_reason, ran, requests) == ("error", [], 3)


async def test_prompt_too_long_is_flagged(tmp_path: Path):
    too_long = {
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 250000 tokens > 200000 maximum",
        },
        "status": 400,
    }
    with aimock(tmp_path, [{"match": {"userMessage": ASK}, "response": too_long}]) as url:
        request = ModelRequest(system="", messages=[UserMessage(content=ASK)])
        items = await collect(model_at(url), request)
    assert len(items) == 1 and isinstance(items[0], ModelFailure)
    assert (items[0].prompt_too_long, items[0].retryable) == (True, False)
    assert "250000 tokens" in items[0].error


async def test_cancellation_propagates():
    arrived = asyncio.Event()
    client, _ = fake(sse(*reply(text("late"))), arrived=arrived)
    request = ModelRequest(system="", messages=[UserMessage(content="hi")])
    async with asyncio.timeout(60):  # a safety net
        task = asyncio.create_task(collect(model_at("http://fake", http_client=client), request))
        await arrived.wait()  # the request is at the server, waiting for its answer
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# -- configuration ----------------------------------------------------------------------------


def test_missing_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_model(f"anthropic:{MODEL}")


async def test_base_url_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with aimock(
        tmp_path, [{"match": {"userMessage": ASK}, "response": {"content": ANSWER}}]
    ) as url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        model = get_model(f"anthropic:{MODEL}")
        request = ModelRequest(system="", messages=[UserMessage(content=ASK)])
        items = await collect(model, request)
        assert len(journal(url)) == 1
    assert isinstance(items[-1], MessageCompleted) and items[-1].message.text == ANSWER
