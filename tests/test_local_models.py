"""Local models as the issue's reporters ran them (issue 31, findings 12-15): what the budget
counts, a server's context window read from the server, the too-long errors of llama.cpp,
Ollama and vLLM compacting the prompt, calls written as text recovered, and malformed arguments
answered to the model — against a fake of the local servers on 127.0.0.1 (`local_servers`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import drive, scripted
from local_servers import TOO_LONG, USAGE, LocalServer, calls, text, too_long
from loopwright import Agent, Rules, Session, tool
from loopwright.approvals import approve_all
from loopwright.attachments import IMAGE_TOKENS, image
from loopwright.events import BudgetCheck, MessageCompleted, StepFinished, ToolResult
from loopwright.messages import AssistantMessage, Text
from loopwright.models import ToolSpec
from loopwright.providers import PRESETS, Endpoint, load_endpoints, make_model, register_endpoint
from loopwright.providers._errors import failure_from
from loopwright.providers._text_calls import recover
from loopwright.state.compaction import Compaction
from loopwright.testing import types

ASK = "what time is it in UTC?"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def clock(ran: list[str]) -> Any:
    @tool
    async def get_time(timezone: str) -> str:
        """Tell the time in a timezone."""
        ran.append(timezone)
        return "12:00"

    return get_time


OPENED: list[Any] = []


@pytest.fixture(autouse=True)
async def close_models() -> Any:
    yield
    while OPENED:
        await OPENED.pop().aclose()


def local(server: LocalServer, kind: str | None = "llamacpp", **options: Any) -> Any:
    endpoint = Endpoint(
        name="local", dialect="openai-chat", base_url=server.url + "/v1", server=kind, **options
    )
    return open_model(endpoint, "qwen2.5-coder")


def open_model(endpoint: Endpoint, name: str) -> Any:
    OPENED.append(model := make_model(endpoint, name))
    return model


def checks(result: Any) -> list[BudgetCheck]:
    return [e for e in result.events if isinstance(e, BudgetCheck)]


# -- 12: the budget counts everything sent ------------------------------------------------------


async def test_the_first_budget_check_counts_the_system_prompt_and_the_tool_schemas():
    instructions = "You tell the time. " * 60  # 1,140 characters
    agent = Agent(model=scripted("It is noon."), instructions=instructions, tools=[clock([])])
    [spec] = agent.tool_specs
    schema = len(spec.name) + len(spec.description) + len(json.dumps(spec.parameters))
    result = await drive(Session(agent).run(ASK))
    message = (len(ASK) + 12) // 4
    assert checks(result)[0].used_tokens == message + (len(instructions) + schema) // 4 == 332


async def test_the_first_budget_check_counts_an_attachment():
    session = Session(Agent(model=scripted("A dot.")))
    result = await drive(session.run("what is this?", attachments=[image(PNG, name="a.png")]))
    assert checks(result)[0].used_tokens == (len("what is this?") + 12) // 4 + IMAGE_TOKENS


# -- 13: the context window, stated or read from the server ------------------------------------

WINDOWS = {  # server kind → (what it says, the window the budget takes)
    "llamacpp": ({}, 4096),
    "ollama": ({"ollama": {"model_info": {"qwen2.context_length": 32768}}}, 32768),
    "vllm": ({"models": [{"id": "qwen2.5-coder", "max_model_len": 16384}]}, 16384),
}


@pytest.mark.parametrize("kind", WINDOWS)
async def test_the_window_is_read_from_the_server_once_a_model(kind: str):
    says, window = WINDOWS[kind]
    with LocalServer([text("noon"), text("noon")], **says) as server:
        model = local(server, kind)
        agent = Agent(model=model)
        first = await drive(Session(agent).run(ASK))
        second = await drive(Session(agent).run(ASK))
    assert [c.budget_tokens for c in checks(first) + checks(second)] == [window, window]
    read = {"llamacpp": "/props", "ollama": "/api/show", "vllm": "/v1/models"}[kind]
    assert server.paths() == [read, "/v1/chat/completions", "/v1/chat/completions"]
    if kind == "ollama":
        assert server.requests[0][1] == {"model": "qwen2.5-coder"}


async def test_ollama_s_num_ctx_is_the_window_it_uses():
    says = {"parameters": "num_ctx 8192\nstop <|im_end|>", "model_info": {"x.context_length": 1}}
    with LocalServer([text("noon")], ollama=says) as server:
        result = await drive(Session(Agent(model=local(server, "ollama"))).run(ASK))
    assert checks(result)[0].budget_tokens == 8192


async def test_a_window_config_states_wins_and_the_server_is_not_asked(tmp_path: Path):
    with LocalServer([text("noon"), text("noon")]) as server:
        toml = tmp_path / "loopwright.toml"
        toml.write_text(
            f'[providers.llamacpp]\nbase_url = "{server.url}/v1"\ncontext_window = 3000\n'
            '[providers.llamacpp.models."qwen2.5-coder"]\ncontext_window = 2048\n'
        )
        [endpoint] = load_endpoints(toml)
        try:
            other = open_model(endpoint, "other")
            model = open_model(endpoint, "qwen2.5-coder")
            result = await drive(Session(Agent(model=model)).run(ASK))
            result_other = await drive(Session(Agent(model=other)).run(ASK))
        finally:
            register_endpoint(PRESETS["llamacpp"])
    # the preset's own values stay (the server kind, calls in text): only the given ones change
    assert (endpoint.server, endpoint.tool_calls_in_text) == ("llamacpp", True)
    assert checks(result)[0].budget_tokens == 2048
    assert checks(result_other)[0].budget_tokens == 3000
    assert "/props" not in server.paths()


async def test_a_server_that_cannot_say_leaves_the_catalog_s_window(caplog: Any):
    with LocalServer([text("noon")]) as server:  # /api/show answers {}: no window in it
        result = await drive(Session(Agent(model=local(server, "ollama"))).run(ASK))
    assert checks(result)[0].budget_tokens == 100_000 and result.text == "noon"


# -- 13: the servers' too-long errors compact the prompt --------------------------------------


@pytest.mark.parametrize("kind", TOO_LONG)
async def test_a_local_server_s_too_long_error_compacts_the_prompt(kind: str):
    answers = [text("Hello."), too_long(kind), text("We said hello."), text("It is noon.")]
    with LocalServer(answers) as server:
        agent = Agent(model=local(server, None), compaction=Compaction(keep_last=1))
        session = Session(agent)
        await drive(session.run("hello"))
        result = await drive(session.run(ASK))
    assert (result.stop_reason, result.text) == ("completed", "It is noon.")
    kinds = types(result.events)
    start = kinds.index("compaction:started")
    assert kinds[start - 2 :] == [
        *("step:started", "budget:check"),
        *("compaction:started", "compaction:finished", "prompt:compaction", "text:delta"),
        *("message:completed", "step:finished", "loop:done", "done"),
    ]
    assert len(server.chats()) == 4


@pytest.mark.parametrize(
    "message",
    [
        TOO_LONG["llamacpp"]["error"]["message"],
        TOO_LONG["ollama"]["error"]["message"],
        TOO_LONG["vllm"]["message"],
        "prompt too long; exceeded max context length by 2480 tokens",  # Ollama's runner
        "input exceeds maximum context length",
    ],
)
def test_the_local_servers_too_long_wordings_are_recognised(message: str):
    class Refused(Exception):
        status_code = 400
        body = {"error": {"message": message}}

    failure = failure_from(Refused(message))
    assert (failure.prompt_too_long, failure.retryable) == (True, False)


# -- 14: calls written as text ----------------------------------------------------------------

WRITTEN = {
    "bare": '{"name": "get_time", "arguments": {"timezone": "UTC"}}',
    "fenced": 'Let me check.\n```json\n{"name": "get_time", "arguments": {"timezone": "UTC"}}\n```',
    "tagged": '<tool_call>\n{"name": "get_time", "arguments": "{\\"timezone\\": \\"UTC\\"}"}\n'
    "</tool_call>",
    "parameters": '[{"name": "get_time", "parameters": {"timezone": "UTC"}}]',
}


@pytest.mark.parametrize("shape", WRITTEN)
async def test_a_call_written_as_text_is_recovered_and_goes_through_the_gate(shape: str):
    ran: list[str] = []
    rules = Rules.from_yaml("rules:\n  - {name: ask-time, tool: get_time, decision: ask}\n")
    with LocalServer([text(WRITTEN[shape]), text("It is 12:00 in UTC.")]) as server:
        model = local(server, None, tool_calls_in_text=True)
        agent = Agent(model=model, tools=[clock(ran)], rules=rules)
        result = await drive(Session(agent).run(ASK, approver=approve_all))
    assert (result.stop_reason, result.text, ran) == ("completed", "It is 12:00 in UTC.", ["UTC"])
    kinds = types(result.events)
    said = ["assistant:text"] if shape == "fenced" else []  # its prose, the call taken out
    assert kinds[: kinds.index("step:finished")] == [
        *("session", "input:received", "step:started", "budget:check", "text:delta"),
        *("message:completed", *said, "approval:pending", "pending:requested"),
        "approval:resolved",
        *("actauth:decision", "tool:started", "toollane:result", "tool:output", "tool:result"),
    ]
    reply = next(e.message for e in result.events if isinstance(e, MessageCompleted))
    [call] = reply.tool_calls
    assert (call.name, call.args, reply.stop_reason) == (
        "get_time",
        {"timezone": "UTC"},
        "tool_use",
    )
    assert reply.text == ("Let me check." if shape == "fenced" else "")
    # the history keeps the call: the next request sends it back as a call, answered
    sent = server.chats()[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"] == {
        "name": "get_time",
        "arguments": '{"timezone": "UTC"}',
    }
    assert sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "12:00"}


async def test_calls_in_text_are_text_unless_the_endpoint_says_so():
    ran: list[str] = []
    with LocalServer([text(WRITTEN["bare"])]) as server:
        agent = Agent(model=local(server, None), tools=[clock(ran)])
        result = await drive(Session(agent).run(ASK))
    assert (result.text, ran) == (WRITTEN["bare"], [])


def test_only_the_request_s_tools_are_calls_and_prose_stays():
    said = 'Use {"name": "Ada", "arguments": {}} or ```json\n{"name": "get_time"}\n``` then.'
    message = AssistantMessage(parts=(Text(text=said),))
    spec = ToolSpec(name="get_time", description="", parameters={})
    made = recover(MessageCompleted(message=message), (spec,)).message
    [call] = made.tool_calls
    assert (made.text, call.name, call.args) == (
        'Use {"name": "Ada", "arguments": {}} or  then.',
        "get_time",
        {},
    )
    untouched = MessageCompleted(message=message)
    assert recover(untouched, ()) is untouched


def test_the_llamacpp_and_ollama_presets_recover_calls_in_text():
    assert {n for n, e in PRESETS.items() if e.tool_calls_in_text} == {"llamacpp", "ollama"}


# -- 15: malformed arguments are answered, and every request's usage counts ---------------------


async def test_malformed_arguments_are_answered_to_the_model_and_every_usage_counts():
    ran: list[str] = []
    answers = [
        calls(("get_time", '{"timezone": "UT')),
        calls(("get_time", {"timezone": "UTC"})),
        text("It is 12:00."),
    ]
    with LocalServer(answers) as server:
        result = await drive(Session(Agent(model=local(server, None), tools=[clock(ran)])).run(ASK))
    assert (result.stop_reason, ran) == ("completed", ["UTC"])
    assert "model:retry" not in types(result.events)
    first = next(e for e in result.events if isinstance(e, ToolResult))
    assert first.status_text == "Error."
    answered = server.chats()[1]["messages"][-1]
    assert answered["role"] == "tool" and answered["content"] == (
        "Not run: the arguments are not a JSON object (Unterminated string starting at: line 1 "
        'column 14 (char 13)): \'{"timezone": "UT\'. Send the call again if you meant it.'
    )
    usage = [e.usage for e in result.events if isinstance(e, StepFinished)]
    assert [(u.input_tokens, u.output_tokens) for u in usage if u] == [
        (USAGE["prompt_tokens"], USAGE["completion_tokens"])
    ] * 3
