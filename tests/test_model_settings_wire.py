"""The exact request body each dialect sends for each model setting: runs against aimock (a
faithful local fake of the three APIs, which also checks Anthropic's extended-thinking rules on a
tool loop), and single requests to an in-process transport that keeps the body."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from aimock import aimock
from conftest import drive
from loopwright import Agent, Hooks, Session, tool
from loopwright.messages import Thinking, ToolCall, UserMessage
from loopwright.model_settings import ModelSettings, ReasoningBudget, session_key
from loopwright.models import ModelRequest
from loopwright.providers import Endpoint, make_model
from loopwright.providers._signatures import RESPONSES
from loopwright.testing import types

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:The model 'claude-sonnet-4-5' is deprecated"),
]

KEY = "TEST_WIRE_KEY"
ASK = "what time is it"
SYSTEM = "You tell the time."
CLAUDE = "claude-sonnet-4-5"
SAMPLING = dict(temperature=0.3, top_p=0.9, max_output_tokens=512)
CACHED = {"type": "ephemeral"}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "test-key")


def recording(transport: Any = None) -> tuple[httpx2.AsyncClient, list[dict[str, Any]]]:
    """An HTTP client that keeps the JSON body of every request it sends."""
    sent: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        sent.append(json.loads(request.content))

    return httpx2.AsyncClient(transport=transport, event_hooks={"request": [keep]}), sent


def model_at(url: str, dialect: str, model: str, http: httpx2.AsyncClient, name: str = "") -> Any:
    base = url if dialect == "anthropic" else url + "/v1"
    name = name or ("anthropic" if dialect == "anthropic" else "openai")
    endpoint = Endpoint(name=name, dialect=dialect, base_url=base, api_key_env=KEY)
    return make_model(endpoint, model, http_client=http)


async def body_of(
    dialect: str, settings: ModelSettings, *, name: str = "", model: str = "", history: Any = ()
) -> Any:
    """The body of one request with these settings (to a transport that answers 500)."""
    http, sent = recording(httpx2.MockTransport(lambda request: httpx2.Response(500)))
    default = CLAUDE if dialect == "anthropic" else "gpt-5"
    chosen = model_at("http://fake", dialect, model or default, http, name)
    messages = [*history, UserMessage(content=ASK)]
    request = ModelRequest(system=SYSTEM, messages=messages, settings=settings, session_id="s-1")
    try:
        [failure] = [item async for item in chosen.stream(request)]
    finally:
        await chosen.aclose()
        await http.aclose()
    assert "HTTP 500" in failure.error
    [body] = sent
    return body


# -- OpenAI: Chat Completions and Responses, through a real run ------------------------------


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses"])
async def test_openai_bodies_carry_every_setting(tmp_path: Path, dialect: str):
    agent_settings = ModelSettings(**SAMPLING, extra={"service_tier": "flex"})
    per_run = {"reasoning": "high"}
    if dialect == "openai-chat":
        per_run["stop"] = ["END"]
    answer = {"reasoning": "First, the clock.", "content": "It is noon."}
    fixture = {"match": {"userMessage": ASK}, "response": answer}
    http, sent = recording()
    with aimock(tmp_path, [fixture]) as url:
        model = model_at(url, dialect, "o4-mini", http)  # a reasoning model: aimock reasons
        session = Session(Agent(model=model, instructions=SYSTEM, settings=agent_settings))
        result = await drive(session.run(ASK, settings=per_run))
        await model.aclose()
    await http.aclose()
    key = session_key(session.id)
    if dialect == "openai-chat":
        expected = {
            "model": "o4-mini",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.3,
            "top_p": 0.9,
            "stop": ["END"],
            "max_completion_tokens": 512,
            "reasoning_effort": "high",
            "prompt_cache_key": key,
            "service_tier": "flex",
        }
    else:
        expected = {
            "model": "o4-mini",
            "input": [{"role": "user", "content": ASK}],
            "stream": True,
            "store": False,
            "instructions": SYSTEM,
            "temperature": 0.3,
            "top_p": 0.9,
            "max_output_tokens": 512,
            "reasoning": {"effort": "high", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": key,
            "service_tier": "flex",
        }
    assert sent == [expected]
    # the reasoning (Responses: its summary) streams as thinking and stays in the reply
    assert result.text == "It is noon." and "thinking:delta" in types(result.events)
    thought = session.messages[-1].parts[0]
    assert isinstance(thought, Thinking) and thought.text == "First, the clock."
    if dialect == "openai-chat":
        assert thought.signature is None
    else:  # the reasoning item, to be sent back (see the tool loop below)
        assert thought.signature is not None and thought.signature.startswith(RESPONSES)
        assert set(json.loads(thought.signature[len(RESPONSES) :])) == {"id", "encrypted_content"}


@pytest.mark.parametrize(
    ("dialect", "settings", "name", "fields"),
    [
        # another endpoint of the dialect: the older limit field, no prompt_cache_key
        ("openai-chat", ModelSettings(max_output_tokens=64, reasoning="off"), "vllm",
         {"max_tokens": 64, "reasoning_effort": "none"}),
        ("openai-chat", ModelSettings(stop="STOP", metadata=False), "openai", {"stop": ["STOP"]}),
        ("openai-chat", ModelSettings(extra={"reasoning_effort": "minimal"}, reasoning="low"),
         "openai", {"reasoning_effort": "minimal", "prompt_cache_key": session_key("s-1")}),
        ("openai-responses", ModelSettings(reasoning="off"), "mylab",
         {"reasoning": {"effort": "none"}}),
        ("openai-responses", ModelSettings(reasoning="medium", metadata=False), "openai",
         {"reasoning": {"effort": "medium", "summary": "auto"},
          "include": ["reasoning.encrypted_content"]}),
    ],
)  # fmt: skip
async def test_openai_settings_per_endpoint(dialect, settings, name, fields):
    body = await body_of(dialect, settings, name=name)
    base = {"openai-chat": {"messages", "stream_options"}, "openai-responses": {"input", "store"}}
    common = {"model", "stream"} | base[dialect] | ({"instructions"} if "store" in body else set())
    assert {k: v for k, v in body.items() if k not in common} == fields


# -- Anthropic -------------------------------------------------------------------------------


async def test_anthropic_body_carries_every_setting(tmp_path: Path):
    settings = ModelSettings(**SAMPLING, stop=["END"], extra={"top_k": 40})
    fixture = {"match": {"userMessage": ASK}, "response": {"content": "It is noon."}}
    http, sent = recording()
    with aimock(tmp_path, [fixture]) as url:
        model = model_at(url, "anthropic", CLAUDE, http)
        session = Session(Agent(model=model, instructions=SYSTEM, settings=settings))
        result = await drive(session.run(ASK))
        await model.aclose()
    await http.aclose()
    assert result.text == "It is noon."
    assert sent == [
        {
            "max_tokens": 512,
            "messages": [{"role": "user", "content": [{"type": "text", "text": ASK}]}],
            "model": CLAUDE,
            "metadata": {"user_id": session_key(session.id)},
            "stop_sequences": ["END"],
            "stream": True,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": CACHED}],
            "temperature": 0.3,
            "top_p": 0.9,
            "top_k": 40,
        }
    ]


async def test_anthropic_thinking_and_redacted_thinking_round_trip_a_tool_loop(tmp_path: Path):
    """aimock answers 400, as the API does, when thinking is on and a tool-loop turn comes back
    without its leading thinking (or redacted thinking) block."""
    ran: list[str] = []

    @tool
    async def clock(tz: str) -> str:
        """The current time in a timezone."""
        ran.append(tz)
        return "12:00"

    leg1 = {
        "toolCalls": [{"name": "clock", "arguments": {"tz": "UTC"}}],
        "reasoning": "The user wants the time.",
        "reasoningSignature": "sig-1",
        "redactedThinking": ["opaque-1"],
    }
    fixtures = [
        {"match": {"userMessage": ASK, "hasToolResult": False}, "response": leg1},
        {"match": {"userMessage": ASK, "hasToolResult": True}, "response": {"content": "Noon."}},
    ]
    http, sent = recording()
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, "anthropic", CLAUDE, http)
        session = Session(Agent(model=model, tools=[clock], settings=ModelSettings()))
        result = await drive(session.run(ASK, settings={"reasoning": "high"}))
        await model.aclose()
    await http.aclose()
    assert (result.stop_reason, result.text, ran) == ("completed", "Noon.", ["UTC"])
    redacted = Thinking(text="", signature="redacted_thinking:opaque-1")
    signed = Thinking(text="The user wants the time.", signature="sig-1")
    first = session.messages[1]
    assert first.parts[:2] == (redacted, signed) and isinstance(first.parts[2], ToolCall)
    thinking = {"type": "enabled", "budget_tokens": 16384}  # "high", below the catalog's 64,000
    assert [(b["thinking"], b["max_tokens"]) for b in sent] == [(thinking, 64_000)] * 2
    assert sent[1]["messages"][1]["content"][:2] == [
        {"type": "redacted_thinking", "data": "opaque-1"},
        {"type": "thinking", "thinking": "The user wants the time.", "signature": "sig-1"},
    ]


@pytest.mark.parametrize(
    ("settings", "model", "fields"),
    [
        (ModelSettings(reasoning="off"), CLAUDE, {"thinking": {"type": "disabled"}}),
        (ModelSettings(reasoning=ReasoningBudget(2048)), CLAUDE,
         {"thinking": {"type": "enabled", "budget_tokens": 2048}}),
        # a model the catalog does not know: 8,192 tokens, and "high" capped at half of them
        (ModelSettings(reasoning="high"), "claude-next", {"max_tokens": 8192,
         "thinking": {"type": "enabled", "budget_tokens": 4096}}),
        (ModelSettings(reasoning="low", max_output_tokens=3000, temperature=1, top_p=0.95),
         CLAUDE, {"max_tokens": 3000, "temperature": 1, "top_p": 0.95,
                  "thinking": {"type": "enabled", "budget_tokens": 1024}}),
        (ModelSettings(metadata=False, extra={"thinking": {"type": "adaptive"}}), CLAUDE,
         {"thinking": {"type": "adaptive"}}),
    ],
)  # fmt: skip
async def test_anthropic_reasoning_levels_and_budgets(settings, model, fields):
    body = await body_of("anthropic", settings, model=model)
    fields = {"max_tokens": 64_000, **fields}
    if settings.metadata is None:
        fields["metadata"] = {"user_id": session_key("s-1")}
    common = {"model", "stream", "messages", "system"}
    assert {k: v for k, v in body.items() if k not in common} == fields


async def test_a_before_request_hook_changes_what_goes_out(tmp_path: Path):
    def cooler(info: Any, request: ModelRequest) -> ModelRequest:
        return replace(request, settings=replace(request.settings, temperature=0.0))

    fixture = {"match": {"userMessage": ASK}, "response": {"content": "It is noon."}}
    http, sent = recording()
    with aimock(tmp_path, [fixture]) as url:
        model = model_at(url, "openai-chat", "gpt-4o-mini", http)
        settings = ModelSettings(temperature=0.7, metadata=False)
        agent = Agent(model=model, settings=settings, hooks=Hooks(before_request=cooler))
        await drive(Session(agent).run(ASK))
        await model.aclose()
    await http.aclose()
    assert sent[0]["temperature"] == 0.0 and "prompt_cache_key" not in sent[0]


# -- reasoning sent back, and only to its own provider ---------------------------------------


async def test_responses_reasoning_items_go_back_in_a_tool_loop(tmp_path: Path):
    @tool
    async def clock(tz: str) -> str:
        """The current time in a timezone."""
        return "12:00"

    leg1 = {"reasoning": "Check the clock.", "toolCalls": [{"name": "clock", "arguments": "{}"}]}
    fixtures = [
        {"match": {"userMessage": ASK, "hasToolResult": False}, "response": leg1},
        {"match": {"userMessage": ASK, "hasToolResult": True}, "response": {"content": "Noon."}},
    ]
    http, sent = recording()
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, "openai-responses", "o4-mini", http)
        agent = Agent(model=model, tools=[clock], settings=ModelSettings(reasoning="low"))
        session = Session(agent)
        result = await drive(session.run(ASK))
        await model.aclose()
    await http.aclose()
    assert result.text == "Noon."
    thought = session.messages[1].parts[0]
    assert isinstance(thought, Thinking) and thought.signature is not None
    kept = json.loads(thought.signature[len(RESPONSES) :])
    summary = [{"type": "summary_text", "text": "Check the clock."}]
    reasoning = {"type": "reasoning", **kept, "summary": summary}
    assert [item.get("type") for item in sent[1]["input"]] == [
        None, "reasoning", "function_call", "function_call_output"
    ]  # fmt: skip
    assert sent[1]["input"][1] == reasoning


async def test_thinking_goes_back_only_to_the_provider_that_made_it():
    from loopwright.messages import AssistantMessage, Text

    claude = Thinking(text="Anthropic's.", signature="c2lnbmF0dXJl")
    redacted = Thinking(text="", signature="redacted_thinking:b3BhcXVl")
    openai = Thinking(
        text="OpenAI's.", signature=RESPONSES + '{"id": "rs_1", "encrypted_content": "x"}'
    )
    unsigned = Thinking(text="A local model's.")
    history = [
        UserMessage(content="hi"),
        AssistantMessage(parts=(claude, redacted, openai, unsigned, Text(text="Hello."))),
    ]
    plain = ModelSettings(metadata=False)
    to_claude = (await body_of("anthropic", plain, history=history))["messages"][1]["content"]
    assert to_claude == [
        {"type": "thinking", "thinking": "Anthropic's.", "signature": "c2lnbmF0dXJl"},
        {"type": "redacted_thinking", "data": "b3BhcXVl"},
        {"type": "text", "text": "Hello."},
    ]
    to_openai = (await body_of("openai-responses", plain, history=history))["input"][1:3]
    assert to_openai == [
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "x",
         "summary": [{"type": "summary_text", "text": "OpenAI's."}]},
        {"role": "assistant", "content": "Hello."},
    ]  # fmt: skip
    to_chat = (await body_of("openai-chat", plain, history=history))["messages"][2]
    assert to_chat == {"role": "assistant", "content": "Hello."}
