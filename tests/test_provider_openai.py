"""The OpenAI dialects (Chat Completions and Responses) against aimock, a faithful local fake of
the APIs, and against hand-written SSE bodies where aimock cannot say it precisely: real runs
through the loop, what went over the wire, and every injected failure ending as SPEC §3.8 says —
retried and completed, or `loop:error` past the bound; never a hang, never a tool run twice."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest

from aimock import aimock, chaos, journal
from conftest import call, drive, scripted, verify
from local_api import Answer, LocalAPI
from loopwright import Agent, ConfigError, RetryPolicy, Session, get_model, tool
from loopwright.events import MessageCompleted, StepFinished
from loopwright.messages import UserMessage
from loopwright.models import ModelFailure, ModelRequest, ToolSpec
from loopwright.models.catalog import lookup
from loopwright.providers import Endpoint, make_model
from loopwright.testing import types
from loopwright.wire import dumps
from virtual_time import virtual

KEY = "TEST_OPENAI_KEY"
DIALECTS = ["openai-chat", "openai-responses"]
FAST = RetryPolicy(attempts=2, backoff=0.01)
ASK = "what time is it"
SYSTEM = "You tell the time."
ARGS = '{"timezone": "UTC"}'


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "test-key")


@asynccontextmanager
async def model_at(url, dialect, name="gpt-4o-mini", *, timeout=120.0, sent=None, http=None):
    """A model served at `url`; `sent` collects each request body as it went out (aimock
    journals Responses requests converted to the Chat shape)."""
    where = {"base_url": url + "/v1", "api_key_env": KEY, "timeout": timeout}
    endpoint = Endpoint(name="openai", dialect=dialect, **where)
    if sent is not None:

        async def keep(request: httpx2.Request) -> None:
            sent.append(json.loads(request.content))

        http = httpx2.AsyncClient(event_hooks={"request": [keep]})
    model = make_model(endpoint, name, http_client=http)
    try:
        yield model
    finally:
        await model.aclose()
        if http is not None:
            await http.aclose()


def clock(ran: list[str]):
    @tool
    async def get_time(timezone: str) -> str:  # (async: on the event loop, as virtual time needs)
        """Tell the time in a timezone."""
        ran.append(timezone)
        return "12:00"

    return get_time


async def ask(model: Any, ran: list[str], *, retry: RetryPolicy = FAST, **agent: Any):
    options = {"instructions": SYSTEM, "retry": retry, **agent}
    return await drive(Session(Agent(model=model, tools=[clock(ran)], **options)).run(ASK))


async def collect(model: Any, **options: Any) -> list[Any]:
    request = ModelRequest(system=SYSTEM, messages=[UserMessage(content=ASK)], **options)
    return [item async for item in model.stream(request)]


def collapse(kinds: list[str]) -> list[str]:
    """Event types with runs of one delta type folded into one (chunking differs by source)."""
    out: list[str] = []
    for kind in kinds:
        if not (out and out[-1] == kind and kind.endswith(":delta")):
            out.append(kind)
    return out


def retries(result: Any) -> list[Any]:
    return [e for e in result.events if e.type == "model:retry"]


def leg(response: dict[str, Any], *, tool_result=False, seq=None, **options) -> dict[str, Any]:
    """One aimock fixture answering `response` to the question (before or after the tool ran;
    `seq`: only on the n-th request that matches)."""
    match = {"userMessage": ASK, "hasToolResult": tool_result, "sequenceIndex": seq}
    match = {k: v for k, v in match.items() if v is not None}
    return {"match": match, "response": response, **options}


def error(status: int, message: str, code: str, **extra: Any) -> dict[str, Any]:
    body = {"message": message, "type": "api_error", "code": code}
    return {"error": body, "status": status, **extra}


CALL = {"toolCalls": [{"name": "get_time", "arguments": ARGS}]}
ANSWER = {"content": "It is 12:00 UTC."}
SECOND = leg(ANSWER, tool_result=True)


# -- a real two-step run ---------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_two_step_tool_run(tmp_path, dialect):
    # usage in the Chat and in the Responses spelling
    usage = dict(prompt_tokens=120, completion_tokens=30, input_tokens=120, output_tokens=30)
    thinking, text = "The user wants the time.", "Let me check."
    first = {"reasoning": thinking, "content": text, **CALL, "usage": usage}
    ran: list[str] = []
    sent: list[dict[str, Any]] = []
    with aimock(tmp_path, [leg(first), SECOND]) as url:
        # o4-mini: a catalog model that reasons, so aimock streams the reasoning too
        async with model_at(url, dialect, "o4-mini", sent=sent) as model:
            result = await ask(model, ran, max_output_tokens=256)
        assert len(journal(url)) == 2
    assert (result.stop_reason, result.text, ran) == ("completed", "It is 12:00 UTC.", ["UTC"])

    reply = next(e.message for e in result.events if isinstance(e, MessageCompleted))
    assert reply.model == "openai:o4-mini" and reply.stop_reason == "tool_use"
    assert [p.type for p in reply.parts] == ["thinking", "text", "tool_call"]
    assert reply.tool_calls[0].args == {"timezone": "UTC"}
    info = lookup("o4-mini")
    assert info is not None and reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (120, 30)
    assert reply.usage.cost == pytest.approx(info.cost(reply.usage)) and reply.usage.cost > 0
    step = next(e for e in result.events if isinstance(e, StepFinished))
    assert step.usage == reply.usage

    script = scripted(
        {"thinking": thinking, "text": text, "tool_calls": [call("get_time", timezone="UTC")]},
        ANSWER["content"],
    )
    expected = await ask(script, [])
    assert collapse(types(result.events)) == collapse(types(expected.events))

    body = sent[1]
    if dialect == "openai-chat":
        system, user, assistant, tool_result = body["messages"]
        assert system == {"role": "system", "content": SYSTEM}
        assert user == {"role": "user", "content": ASK}
        assert assistant["role"] == "assistant" and assistant["content"] == text
        [tool_call] = assistant["tool_calls"]
        assert tool_call["function"] == {"name": "get_time", "arguments": ARGS}
        assert tool_result == {"role": "tool", "tool_call_id": tool_call["id"], "content": "12:00"}
        [spec] = body["tools"]
        assert spec["type"] == "function" and spec["function"]["name"] == "get_time"
        assert spec["function"]["parameters"]["required"] == ["timezone"]
        assert body["stream_options"] == {"include_usage": True}
        assert body["max_completion_tokens"] == 256
    else:
        assert body["instructions"] == SYSTEM and body["store"] is False
        user, reasoning, said, function_call, output = body["input"]
        # the reasoning item goes back as it came, with its encrypted content (store: false)
        summary = [{"type": "summary_text", "text": thinking}]
        assert (reasoning["type"], reasoning["summary"]) == ("reasoning", summary)
        encrypted = base64.b64decode(reasoning["encrypted_content"]).decode()
        assert encrypted == f"aimock-encrypted-reasoning:{reasoning['id']}"
        assert user == {"role": "user", "content": ASK}
        assert said == {"role": "assistant", "content": text}
        assert function_call["type"] == "function_call" and function_call["arguments"] == ARGS
        call_id = function_call["call_id"]
        assert output == {"type": "function_call_output", "call_id": call_id, "output": "12:00"}
        [spec] = body["tools"]
        assert (spec["type"], spec["name"], spec["strict"]) == ("function", "get_time", False)
        assert body["max_output_tokens"] == 256


# -- injected failures through the loop ------------------------------------------------------

BAD = {"toolCalls": [{"name": "get_time", "arguments": '{"timezone": "UT'}]}
RATE_LIMITED = error(429, "Rate limit reached", "rate_limit_exceeded", retryAfter=0.1)
SERVER_ERROR = error(500, "The server had an error", "server_error")
FIRST_ATTEMPTS = {  # fault → (the first attempt's fixture, the retry's error, its delay)
    "429": (leg(RATE_LIMITED, seq=0), "HTTP 429", 0.1),  # Retry-After, not our backoff
    "500": (leg(SERVER_ERROR, seq=0), "HTTP 500", 0.01),
}


@pytest.mark.parametrize("fault", FIRST_ATTEMPTS)
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_failed_attempt_is_retried_and_the_tool_runs_once(tmp_path, dialect, fault):
    first, error_text, delay = FIRST_ATTEMPTS[fault]
    ran: list[str] = []
    with aimock(tmp_path, [first, leg(CALL, seq=1), SECOND]) as url:
        async with model_at(url, dialect) as model:
            result = await ask(model, ran)
        assert len(journal(url)) == 3
    assert result.stop_reason == "completed" and ran == ["UTC"]
    [retry] = retries(result)
    assert error_text in retry.error and retry.delay == pytest.approx(delay)
    first_try = types(result.events)[: types(result.events).index("model:retry")]
    assert "message:completed" not in first_try and "tool:started" not in first_try


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_malformed_arguments_are_an_error_result_the_model_corrects(tmp_path, dialect):
    """Issue 31, finding 15: not a blind retry of the same request, whose usage was lost."""
    ran: list[str] = []
    fixtures = [leg(BAD), leg(CALL, tool_result=True, seq=0), leg(ANSWER, tool_result=True, seq=1)]
    with aimock(tmp_path, fixtures) as url:
        async with model_at(url, dialect) as model:
            result = await ask(model, ran)
        assert len(journal(url)) == 3
    assert (result.stop_reason, ran, retries(result)) == ("completed", ["UTC"], [])
    [error, _] = [e for e in result.events if e.type == "tool:output"]
    assert error.is_error and error.content.startswith(
        "Not run: the arguments are not a JSON object (Unterminated string"
    )
    steps = [e for e in result.events if isinstance(e, StepFinished)]
    assert len(steps) == 3 and all(s.usage is not None for s in steps)  # each request's usage


async def test_rate_limited_past_the_bound_never_reruns_the_tool(tmp_path):
    ran: list[str] = []
    with aimock(tmp_path, [leg(CALL), SECOND]) as url:

        @tool
        def get_time(timezone: str) -> str:
            """Tell the time; the API refuses every request from now on."""
            ran.append(timezone)
            chaos(url, rateLimitRate=1.0)
            return "12:00"

        retry = RetryPolicy(attempts=2, backoff=0.01, max_delay=0.05)  # aimock says wait 1 s
        async with model_at(url, "openai-chat") as model:
            agent = Agent(model=model, tools=[get_time], retry=retry)
            result = await drive(Session(agent).run(ASK))
        assert len(journal(url)) == 1 + 3
    assert result.stop_reason == "error" and ran == ["UTC"]
    assert types(result.events)[-2:] == ["loop:error", "done"]
    assert len(retries(result)) == 2 and all("HTTP 429" in r.error for r in retries(result))


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_refusal_echoing_the_key_leaves_redacted(tmp_path, dialect):  # (P11)
    refused = error(401, "Incorrect API key provided: test-key.", "invalid_api_key")
    with aimock(tmp_path, [leg(refused, tool_result=None)]) as url:
        async with model_at(url, dialect) as model:  # (its key is registered: redacted)
            result = await Session(Agent(model=model, retry=FAST)).run(ASK).result()
    assert "HTTP 401" in result.text and "test-key" in result.text  # raw in process
    stored = [dumps(e) for e in result.events]
    assert "provided: [redacted]." in stored[-1] and not [s for s in stored if "test-key" in s]


async def test_stalled_server_times_out_and_errors_past_the_bound(tmp_path):
    """aimock holds every request 30 s (its most): only the 0.5 s timeout can end them."""
    ran: list[str] = []
    with aimock(tmp_path, [leg(CALL), SECOND], extra=("--chaos-latency", "30000")) as url:
        async with model_at(url, "openai-chat", timeout=0.5) as model:
            result = await ask(model, ran)
    assert result.stop_reason == "error" and ran == []
    assert len(retries(result)) == 2 and "Timeout" in retries(result)[0].error
    assert types(result.events)[-2:] == ["loop:error", "done"]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_prompt_too_long_is_flagged(tmp_path, dialect):
    message = "This model's maximum context length is 128000 tokens. However, you sent 130000."
    too_long = error(400, message, "context_length_exceeded")
    with aimock(tmp_path, [leg(too_long, tool_result=None)]) as url:
        async with model_at(url, dialect) as model:
            [failure] = await collect(model)
    assert isinstance(failure, ModelFailure)
    assert failure.prompt_too_long and not failure.retryable
    assert "maximum context length" in failure.error


# -- hand-written SSE bodies: a clean end before the finish, and the other endings -----------


def chat_sse(*deltas: dict[str, Any], finish=None, usage=None) -> str:
    """A Chat Completions stream in the wire format; without a finish there is no [DONE]."""
    bodies: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    if finish:
        bodies.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage:
        bodies.append({"choices": [], "usage": usage})
    frame = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out = "".join(f"data: {json.dumps({**frame, **b})}\n\n" for b in bodies)
    return out + ("data: [DONE]\n\n" if finish else "")


def tool_delta(fragment: str, first: bool = False) -> dict[str, Any]:
    head = {"id": "call_1", "type": "function"} if first else {}
    function = {"name": "get_time"} if first else {}
    return {"tool_calls": [{"index": 0, **head, "function": {**function, "arguments": fragment}}]}


def responses_sse(*events: dict[str, Any]) -> str:
    """A Responses stream in the wire format: named events, numbered."""
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': i})}\n\n"
        for i, e in enumerate(events)
    )


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"response.{kind}", **fields}


def delta(kind: str, text: str, index: int = 0) -> dict[str, Any]:
    content = {} if kind == "function_call_arguments" else {"content_index": 0}
    where = {"item_id": f"item_{index}", "output_index": index, **content}
    return event(f"{kind}.delta", **where, delta=text)


def ended(status: str, **fields: Any) -> dict[str, Any]:
    response = dict(id="resp_1", object="response", created_at=1, model="m", output=[])
    return event(status, response={**response, "status": status, **fields})


CALL_ITEM = dict(type="function_call", id="item_0", call_id="call_1", name="get_time")
ADDED = event("output_item.added", output_index=0, item={**CALL_ITEM, "arguments": ""})
USAGE = dict(input_tokens=10, output_tokens=5, total_tokens=15)
USAGE |= {"input_tokens_details": {"cached_tokens": 4}, "output_tokens_details": {}}
CHAT_USAGE = {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}
CUT_ARGS = '{"timezone": "U'
REPLIES = {  # dialect → a reply cut inside the arguments, the tool call, the answer
    "openai-chat": (
        chat_sse({"role": "assistant"}, tool_delta("", True), tool_delta(CUT_ARGS)),
        chat_sse(tool_delta("", True), tool_delta(ARGS), finish="tool_calls", usage=CHAT_USAGE),
        chat_sse({"content": "It is 12:00 UTC."}, finish="stop"),
    ),
    "openai-responses": (
        responses_sse(ended("in_progress"), ADDED, delta("function_call_arguments", CUT_ARGS)),
        responses_sse(ADDED, delta("function_call_arguments", ARGS), ended("completed")),
        responses_sse(delta("output_text", "It is 12:00 UTC."), ended("completed")),
    ),
}


@asynccontextmanager
async def fake_model(dialect, bodies: list[str], seen: list, endpoint="openai") -> AsyncIterator:
    """A model whose server answers request n with the n-th SSE body (the last one after)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        body = bodies[min(len(seen), len(bodies)) - 1]
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, content=body.encode())

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        at = Endpoint(name=endpoint, dialect=dialect, base_url="http://fake/v1", api_key_env=KEY)
        yield make_model(at, "gpt-4o-mini", http_client=http)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stream_ending_early_mid_tool_call_is_retried(dialect):
    seen: list[dict[str, Any]] = []
    ran: list[str] = []
    async with fake_model(dialect, list(REPLIES[dialect]), seen) as model:
        items = await collect(model)
        assert types(items[:-1]) == ["tool:delta", "tool:delta"]
        assert items[-2].partial_args == {"timezone": "U"}  # parsed as it came
        cut = ModelFailure(error="the stream ended before the reply was complete", retryable=True)
        assert items[-1] == cut
        seen.clear()
        result = await ask(model, ran)
    assert result.stop_reason == "completed" and ran == ["UTC"] and len(seen) == 3
    assert len(retries(result)) == 1


@pytest.mark.parametrize("fault", ["stall", "cut"])
@pytest.mark.parametrize("dialect", DIALECTS)
@virtual
async def test_a_stalled_or_cut_attempt_is_retried_and_the_tool_runs_once(tmp_path, dialect, fault):
    """The first attempt streams part of the tool call, then goes silent past the endpoint's
    timeout (on virtual time: 10 s pass at once), or loses its connection once the loop has
    emitted a tool delta; the retry completes and the tool runs once."""
    cut = asyncio.Event()
    partial, tool_call, answer = (body.encode() for body in REPLIES[dialect])
    first = Answer(partial, then="stall" if fault == "stall" else cut)
    loop, ran, events, retried = asyncio.get_running_loop(), [], [], []
    async with (
        LocalAPI(tmp_path, [first, Answer(tool_call), Answer(answer)]) as api,
        model_at("http://api", dialect, timeout=10, http=api.client()) as model,
    ):
        agent = Agent(model=model, tools=[clock(ran)], instructions=SYSTEM, retry=FAST)
        async for event in Session(agent).run(ASK):
            events.append(event)
            if event.type == "tool:delta":
                cut.set()
            if event.type == "model:retry":
                retried.append(loop.time())
    verify(events)
    assert events[-1].stop_reason == "completed" and ran == ["UTC"] and len(api.requests) == 3
    [retry] = [e for e in events if e.type == "model:retry"]
    first_try = types(events)[: types(events).index("model:retry")]
    assert "tool:delta" in first_try and "tool:started" not in first_try
    stalled = ("APITimeoutError: Request timed out.", [pytest.approx(10)])  # the timeout's 10 s
    cut_off = ("APIConnectionError: Connection error.", [0])  # at once
    assert (retry.error, retried) == (stalled if fault == "stall" else cut_off)


THINK_AND_SAY = (delta("reasoning_text", "hmm"), delta("output_text", "Hel", 1))
SUMMARY_AND_SAY = (delta("reasoning_summary_text", "hmm"), delta("output_text", "Hel", 1))
TRUNCATED = {"incomplete_details": {"reason": "max_output_tokens"}, "usage": USAGE}
FAILED = {"error": {"code": "server_error", "message": "The server had an error"}}
ERROR = {"type": "error", "code": "invalid_prompt", "message": "Bad prompt", "param": None}
ENDINGS = {
    "chat-length": chat_sse({"reasoning": "hmm"}, {"content": "Hel"}, finish="length"),
    "chat-filtered": chat_sse({"reasoning_content": "hmm"}, {"content": "Hel"}, finish="x"),
    "incomplete": responses_sse(*THINK_AND_SAY, ended("incomplete", **TRUNCATED)),
    "completed": responses_sse(*SUMMARY_AND_SAY, ended("completed", usage=USAGE)),
    "failed": responses_sse(ended("failed", **FAILED)),
    "error": responses_sse(ERROR),
}
EXPECTED = {
    "chat-length": "max_tokens",
    "chat-filtered": "end_turn",
    "incomplete": "max_tokens",
    "completed": "end_turn",
    "failed": ModelFailure(error="server_error: The server had an error", retryable=True),
    "error": ModelFailure(error="invalid_prompt: Bad prompt", retryable=False),
}


@pytest.mark.parametrize("ending", ENDINGS)
async def test_how_a_stream_ends(ending):
    dialect = "openai-chat" if ending.startswith("chat") else "openai-responses"
    expected = EXPECTED[ending]
    async with fake_model(dialect, [ENDINGS[ending]], []) as model:
        items = await collect(model)
    if isinstance(expected, ModelFailure):
        assert items == [expected]
        return
    assert types(items) == ["thinking:delta", "text:delta", "message:completed"]
    message = items[-1].message
    assert (message.stop_reason, message.parts[0].text, message.text) == (expected, "hmm", "Hel")
    if dialect == "openai-responses":
        assert message.usage.cache_read_tokens == 4 and message.usage.cost is not None


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_reply_streaming_past_the_bound_is_stopped(dialect, monkeypatch):
    """P10: what a reply streams is bounded on our side, not only by the request's deadline."""
    from loopwright.providers import _bounds

    monkeypatch.setattr(_bounds, "MAX_REPLY_CHARS", 10)
    pieces = ("four", "five!", "and more")
    body = (
        chat_sse(*({"content": p} for p in pieces), finish="stop")
        if dialect == "openai-chat"
        else responses_sse(*(delta("output_text", p) for p in pieces), ended("completed"))
    )
    async with fake_model(dialect, [body], []) as model:
        items = await collect(model)
    assert [getattr(i, "delta", None) for i in items[:-1]] == ["four", "five!"]
    assert items[-1] == ModelFailure(
        error="the reply streamed over 10 characters: stopped", retryable=False
    )


@pytest.mark.parametrize(
    ("endpoint", "field"), [("openai", "max_completion_tokens"), ("vllm", "max_tokens")]
)
async def test_output_limit_field_and_notes(endpoint, field):
    seen: list[dict[str, Any]] = []
    tools = (ToolSpec(name="get_time", description="Tell the time.", parameters={}),)
    answer = REPLIES["openai-chat"][2]
    async with fake_model("openai-chat", [answer], seen, endpoint=endpoint) as model:
        await collect(model, max_output_tokens=64, notes=("Be brief.", "Use UTC."), tools=tools)
    assert seen[0][field] == 64 and len(seen[0]["messages"]) == 3
    assert seen[0]["messages"][-1] == {"role": "user", "content": "Be brief.\n\nUse UTC."}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_cancel_propagates_out_of_a_waiting_stream(dialect):
    arrived = asyncio.Event()

    async def never(request: httpx2.Request) -> httpx2.Response:
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(never))
    async with model_at("http://fake", dialect, http=http) as model, asyncio.timeout(60):
        task = asyncio.create_task(collect(model))
        await arrived.wait()  # the request is at the server, waiting for its answer
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# -- configuration ---------------------------------------------------------------------------


def test_missing_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_model("openai:gpt-4o-mini")


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai-responses:gpt-4o-mini"])
async def test_openai_base_url_is_honoured(tmp_path, monkeypatch, spec):
    with aimock(tmp_path, [leg(ANSWER, tool_result=None)]) as url:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
        model = get_model(spec)
        try:
            items = await collect(model)
        finally:
            await model.aclose()
        [entry] = journal(url)
    assert entry["path"] == ("/v1/responses" if "responses" in spec else "/v1/chat/completions")
    assert isinstance(items[-1], MessageCompleted)
    assert items[-1].message.text == "It is 12:00 UTC."


def test_a_model_survives_a_new_event_loop(tmp_path):
    """A client's pool belongs to one event loop: `run_sync` twice (or one CLI command after
    another) must not reuse the pool the last loop left behind."""
    with aimock(tmp_path, [leg(ANSWER, tool_result=None)]) as url:
        endpoint = Endpoint(name="openai", dialect="openai-chat", base_url=url + "/v1")
        model = make_model(endpoint, "gpt-4o-mini")

        async def once() -> list[Any]:
            items = await collect(model)
            await model._client().close()  # what a finished loop leaves: a pool that cannot serve
            return items

        runs = [asyncio.run(once()) for _ in range(2)]
    assert [types(items) for items in runs] == [["text:delta", "message:completed"]] * 2
