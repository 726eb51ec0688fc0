"""Structured output and truncation on each dialect's wire, against aimock: the exact field each
dialect sends for the output schema (Chat `response_format`, Responses `text.format`, Anthropic
`output_config.format`), a wrong answer asked again, and a reply cut by the output limit
(`length` / `max_tokens` / `incomplete`) continued."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import drive
from loopwright import Agent, Session
from loopwright import events as ev
from loopwright.messages import UserMessage
from test_model_settings_wire import CLAUDE, model_at, recording

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:The model 'claude-sonnet-4-5' is deprecated"),
]

KEY = "TEST_WIRE_KEY"
ASK = "the third city of France"
DIALECTS = ["openai-chat", "openai-responses", "anthropic"]
CONTINUE = (
    "[Your reply was cut off by the output limit. Continue exactly where you stopped, "
    "without repeating anything.]"
)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "test-key")


class City(BaseModel):
    name: str
    population: int


SCHEMA = City.model_json_schema()
ANSWER_TOOL = (
    "Give your final answer by calling this tool: its arguments are the answer. Call it alone, "
    "once you have everything you need."
)
ANTHROPIC_SCHEMA = {  # what the SDK's transform_schema makes of it: closed, titles kept
    "type": "object",
    "title": "City",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "population": {"type": "integer", "title": "Population"},
    },
    "additionalProperties": False,
    "required": ["name", "population"],
}


def format_field(dialect: str, body: dict[str, Any]) -> Any:
    """The body's structured-output field, as the dialect names it."""
    if dialect == "openai-chat":
        return body["response_format"]
    if dialect == "openai-responses":
        return body["text"]
    return body["output_config"]


EXPECTED = {
    "openai-chat": {
        "type": "json_schema",
        "json_schema": {"name": "City", "schema": SCHEMA, "strict": False},
    },
    "openai-responses": {
        "format": {"type": "json_schema", "name": "City", "schema": SCHEMA, "strict": False}
    },
    "anthropic": {"format": {"type": "json_schema", "schema": ANTHROPIC_SCHEMA}},
}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_native_structured_output_one_invalid_then_one_valid_answer(
    tmp_path: Path, dialect: str
):
    from aimock import aimock

    fixtures = [
        {"match": {"userMessage": ASK}, "response": {"content": '{"name": "Lyon"}'}},
        {
            "match": {"userMessage": "Answer again"},
            "response": {"content": '{"name": "Lyon", "population": 522250}'},
        },
    ]
    http, sent = recording()
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, dialect, CLAUDE if dialect == "anthropic" else "gpt-5", http)
        session = Session(Agent(model=model, output_type=City))
        result = await drive(session.run(ASK))
        await model.aclose()
    await http.aclose()
    assert result.output == City(name="Lyon", population=522250)
    assert result.text == '{"name":"Lyon","population":522250}'
    [invalid] = [e for e in result.events if isinstance(e, ev.OutputInvalid)]
    assert invalid.errors == ["population: Field required"]
    first, second = sent
    assert format_field(dialect, first) == format_field(dialect, second) == EXPECTED[dialect]
    assert "tools" not in first  # native: no final-answer tool
    note = invalid.message.content
    assert json.dumps(note)[1:-1] in json.dumps(second)  # the re-ask went out as user text


CUT_DIALECTS = ["openai-chat", "anthropic"]
"""aimock's Responses stream says `response.completed` with status `incomplete` and no
`incomplete_details`; the API sends `response.incomplete` with the reason: tested below."""


@pytest.mark.parametrize("dialect", CUT_DIALECTS)
async def test_a_reply_cut_by_the_output_limit_is_continued(tmp_path: Path, dialect: str):
    from aimock import aimock

    fixtures = [
        {
            "match": {"userMessage": ASK},
            "response": {"content": "Lyon is a ci", "finishReason": "length"},
        },
        {"match": {"userMessage": "Continue exactly"}, "response": {"content": "ty of France."}},
    ]
    http, sent = recording()
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, dialect, CLAUDE if dialect == "anthropic" else "gpt-5", http)
        session = Session(Agent(model=model, continue_truncated=1))
        result = await drive(session.run(ASK))
        await model.aclose()
    await http.aclose()
    [cut] = [e for e in result.events if isinstance(e, ev.MessageTruncated)]
    assert cut.detail == "max_tokens"
    assert cut.message == UserMessage(content=CONTINUE)
    assert result.text == "Lyon is a city of France."
    assert (result.stop_reason, result.stop_detail) == ("completed", None)
    assert len(sent) == 2


@pytest.mark.parametrize("dialect", CUT_DIALECTS)
async def test_a_cut_reply_not_continued_ends_max_tokens(tmp_path: Path, dialect: str):
    from aimock import aimock

    fixtures = [
        {
            "match": {"userMessage": ASK},
            "response": {"content": "Lyon is a ci", "finishReason": "length"},
        }
    ]
    http, _ = recording()
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, dialect, CLAUDE if dialect == "anthropic" else "gpt-5", http)
        result = await drive(Session(Agent(model=model)).run(ASK))
        await model.aclose()
    await http.aclose()
    assert result.events[-4:] == [
        result.events[-4],
        ev.MessageTruncated(detail="max_tokens"),
        ev.LoopDone(text="Lyon is a ci"),
        ev.Done(text="Lyon is a ci", stop_reason="max_tokens"),
    ]
    assert isinstance(result.events[-4], ev.StepFinished)
    assert result.stop_reason == "max_tokens"


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def responses_reply(text: str, *, cut: bool) -> bytes:
    """A Responses stream in the API's shape: a cut one ends `response.incomplete` with
    `incomplete_details.reason: max_output_tokens`."""
    usage = {
        "input_tokens": 9,
        "output_tokens": 4,
        "total_tokens": 13,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-5",
        "status": "incomplete" if cut else "completed",
        "output": [],
        "usage": usage,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if cut:
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    delta = {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": text,
        "sequence_number": 1,
        "logprobs": [],
    }
    end = "response.incomplete" if cut else "response.completed"
    return sse(delta, {"type": end, "sequence_number": 2, "response": response})


async def test_responses_incomplete_for_max_output_tokens_is_continued():
    import httpx2

    replies = [responses_reply("Lyon is a ci", cut=True), responses_reply("ty.", cut=False)]

    def answer(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, content=replies.pop(0), headers=headers)

    http, sent = recording(httpx2.MockTransport(answer))
    model = model_at("http://fake", "openai-responses", "gpt-5", http)
    result = await drive(Session(Agent(model=model, continue_truncated=1)).run(ASK))
    await model.aclose()
    await http.aclose()
    assert [e.detail for e in result.events if isinstance(e, ev.MessageTruncated)] == ["max_tokens"]
    assert result.text == "Lyon is a city."
    assert sent[1]["input"][-2:] == [
        {"role": "assistant", "content": "Lyon is a ci"},
        {"role": "user", "content": CONTINUE},
    ]


TOOL_EXPECTED = {
    "openai-chat": {
        "type": "function",
        "function": {"name": "final_answer", "description": ANSWER_TOOL, "parameters": SCHEMA},
    },
    "openai-responses": {
        "type": "function",
        "name": "final_answer",
        "description": ANSWER_TOOL,
        "parameters": SCHEMA,
        "strict": False,
    },
    "anthropic": {
        "name": "final_answer",
        "description": ANSWER_TOOL,
        "input_schema": SCHEMA,
        "cache_control": {"type": "ephemeral"},
    },
}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_output_mode_tool_sends_the_final_answer_tool(tmp_path: Path, dialect: str):
    from aimock import aimock

    arguments = {"name": "Lyon", "population": 522250}
    fixture = {
        "match": {"userMessage": ASK},
        "response": {"toolCalls": [{"name": "final_answer", "arguments": arguments}]},
    }
    http, sent = recording()
    with aimock(tmp_path, [fixture]) as url:
        model = model_at(url, dialect, CLAUDE if dialect == "anthropic" else "gpt-5", http)
        agent = Agent(model=model, output_type=City, output_mode="tool")
        result = await drive(Session(agent).run(ASK))
        await model.aclose()
    await http.aclose()
    assert result.output == City(name="Lyon", population=522250)
    [body] = sent
    assert body["tools"] == [TOOL_EXPECTED[dialect]]
    assert not {"response_format", "text", "output_config"} & set(body)
    [reply] = [e for e in result.events if isinstance(e, ev.MessageCompleted)]
    assert reply.message.text == json.dumps(arguments) and not reply.message.tool_calls


async def test_only_the_official_endpoints_are_asked_natively():
    """Compatible servers vary (DeepSeek takes no JSON Schema format): they get the tool."""
    from loopwright.loop.output import FinalAnswerModel, Output, answering

    output = Output.of(City, None)
    http, _ = recording()
    for name, dialect, native in [
        ("openai", "openai-chat", True),
        ("openai-responses", "openai-responses", True),
        ("anthropic", "anthropic", True),
        ("deepseek", "openai-chat", False),
        ("mylab", "anthropic", False),
    ]:
        model = model_at("http://fake", dialect, "m", http, name)
        assert model.native_output is native, name
        asked = answering(model, output, "auto")
        assert isinstance(asked, FinalAnswerModel) is not native, name
        assert answering(model, output, "native") is model
        await model.aclose()
    await http.aclose()
