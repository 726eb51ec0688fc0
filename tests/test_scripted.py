"""The offline models: script files, streaming, failures, the function model."""

from __future__ import annotations

import asyncio

import pytest

from conftest import run_agent
from loopwright import Agent, ConfigError, Session, UnknownModel, get_model, tool
from loopwright.events import MessageCompleted
from loopwright.messages import AssistantMessage, Text, ToolCall, ToolResultMessage, UserMessage
from loopwright.models import ModelFailure, ModelRequest
from loopwright.testing import FunctionModel, Reply, ScriptedModel, types


def test_script_files_load_from_yaml_and_json(tmp_path):
    yaml_path = tmp_path / "s.yaml"
    yaml_path.write_text("replies:\n  - text: hi\n    chunk: 1\n  - fail: {error: x}\n")
    model = get_model(f"scripted:{yaml_path}")
    assert isinstance(model, ScriptedModel)
    assert model.name == f"scripted:{yaml_path}"
    assert [r.text for r in model.replies] == ["hi", ""]
    assert model.replies[1].fail == ModelFailure(error="x")
    json_path = tmp_path / "s.json"
    json_path.write_text('[{"tool_calls": [{"name": "t", "args": {"a": 1}, "id": "c"}]}, "bye"]')
    model = ScriptedModel.from_file(json_path)
    assert model.replies[0].tool_calls[0].args == {"a": 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("replies: 3", "a script is a list of replies"),
        ("- {txt: hi}", "unknown keys ['txt']"),
        ("- {tool_calls: [{args: {}}]}", "needs at least a 'name'"),
        ("- [", "invalid script"),
    ],
)
def test_bad_scripts_are_clear_configuration_errors(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        ScriptedModel.from_file(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_missing_script_and_unknown_provider():
    with pytest.raises(ConfigError, match="cannot read script"):
        get_model("scripted:/nonexistent/script.yaml")
    with pytest.raises(UnknownModel, match="unknown model 'warp:9'"):
        get_model("warp:9")
    with pytest.raises(UnknownModel):
        get_model("no-colon")


async def test_text_streams_in_chunks_and_the_requests_are_recorded():
    model = ScriptedModel.from_script(
        [
            {
                "text": "abcdefg",
                "chunk": 3,
                "thinking": "hm",
                "usage": {"input_tokens": 7, "output_tokens": 2},
            }
        ]
    )
    result = await run_agent(Agent(model=model, instructions="Be brief."), "hi")
    deltas = [(e.type, e.delta) for e in result.events if e.type.endswith(":delta")]
    assert deltas == [
        ("thinking:delta", "hm"),
        ("text:delta", "abc"),
        ("text:delta", "def"),
        ("text:delta", "g"),
    ]
    completed = next(e for e in result.events if e.type == "message:completed")
    assert completed.message.usage.input_tokens == 7
    assert [p.type for p in completed.message.parts] == ["thinking", "text"]
    [request] = model.requests
    assert request.system == "Be brief." and [m.content for m in request.messages] == ["hi"]
    model.assert_exhausted()


async def test_exhausted_script_ends_the_run_with_an_error():
    model = ScriptedModel.from_script([])
    result = await run_agent(Agent(model=model))
    assert result.events[-2].error == (
        "model request failed: script exhausted: all 0 replies were used"
    )
    with pytest.raises(AssertionError):
        ScriptedModel.from_script(["x"]).assert_exhausted()


async def test_function_model_sync_and_async():
    def reply(request: ModelRequest) -> str:
        return f"you said {request.messages[-1].content}"

    async def areply(request: ModelRequest) -> Reply:
        return Reply(text="async", chunk=2)

    result = await run_agent(Agent(model=FunctionModel(reply)), "hi")
    assert result.text == "you said hi"
    result = await run_agent(Agent(model=FunctionModel(areply)))
    assert types(result.events).count("text:delta") == 3


def test_providers_register_by_name_and_through_entry_points(tmp_path, monkeypatch):
    from loopwright.models import register_provider

    register_provider("echo", lambda name: FunctionModel(lambda r: name, name=f"echo:{name}"))
    assert get_model("echo:hello").name == "echo:hello"

    dist = tmp_path / "fake_provider-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-provider\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[loopwright.providers]\nfake = fake_provider_mod:make\n"
    )
    (tmp_path / "fake_provider_mod.py").write_text(
        "from loopwright.testing import FunctionModel\n"
        "def make(name):\n    return FunctionModel(lambda r: 'hi', name='fake:' + name)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_model("fake:m1").name == "fake:m1"


async def test_a_script_file_goes_on_where_the_conversation_is(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("replies:\n  - first\n  - {fail: {error: x, retryable: true}}\n  - second\n")
    agent = Agent(model=f"scripted:{path}")
    session = Session(agent)
    assert (await session.run("one").result()).text == "first"
    second = await session.run("two").result()  # a fresh model per run, as in another process
    assert second.text == "second"  # not "first" again
    assert types(second.events).count("model:retry") == 1  # the failure scripted before it


# ---- one model, many conversations: each hears the script from the top --------------------


async def test_two_sessions_on_one_model_each_replay_the_script_even_interleaved():
    started, release, calls = asyncio.Event(), asyncio.Event(), []

    @tool
    async def hold() -> str:
        """Hold on."""
        calls.append(len(calls))
        if len(calls) == 1:  # the first conversation waits here while the second runs
            started.set()
            await release.wait()
        return "held"

    model = ScriptedModel.from_script([{"tool_calls": [{"name": "hold"}]}, "done"])
    agent = Agent(model=model, tools=[hold])
    first = asyncio.create_task(run_agent(agent, "one"))
    await started.wait()
    second = await run_agent(agent, "two")
    release.set()
    first_result = await first
    assert (first_result.text, second.text) == ("done", "done")
    assert [(r.messages[0].content, len(r.messages)) for r in model.requests] == [
        ("one", 1),
        ("two", 1),
        ("two", 3),
        ("one", 3),
    ]
    assert model.unused == 0
    model.assert_exhausted()


async def test_a_session_goes_on_with_its_own_place_after_another_one_started():
    model = ScriptedModel.from_script(["first", "second"])
    a, b = Session(Agent(model=model)), Session(Agent(model=model))
    assert (await a.run("one").result()).text == "first"
    assert (await b.run("one").result()).text == "first"
    assert (await a.run("two").result()).text == "second"
    exhausted = await a.run("three").result()  # the script is over for this conversation only
    assert exhausted.events[-2].error.endswith("script exhausted: all 2 replies were used")
    assert (await b.run("two").result()).text == "second"


async def test_a_scripted_failure_is_replayed_in_each_conversation():
    model = ScriptedModel.from_script(
        [{"fail": {"error": "busy", "retryable": True, "retry_after": 0}}, "hi"]
    )
    for text in ("one", "two"):
        result = await run_agent(Agent(model=model), text)
        assert result.text == "hi"
        assert types(result.events).count("model:retry") == 1
    assert len(model.requests) == 4


async def answer(model: ScriptedModel, *messages) -> str:
    """What the model answers a conversation it never saw (rebuilt from copies, as a store
    reloads it): the reply's text, or the failure."""
    async for item in model.stream(ModelRequest(system="", messages=list(messages))):
        if isinstance(item, MessageCompleted):
            return item.message.text
        if isinstance(item, ModelFailure):
            return f"failed: {item.error}"
    raise AssertionError("no reply")


async def test_a_reloaded_conversation_goes_on_after_its_latest_scripted_reply():
    def said(text):
        return AssistantMessage(parts=(Text(text=text),))

    def user(text):
        return UserMessage(content=text)

    model = ScriptedModel.from_script(["ok", "ok", "done"])
    assert await answer(model, user("a")) == "ok"
    two_oks = (user("a"), said("ok"), user("b"), said("ok"), user("c"))
    assert await answer(model, *two_oks) == "done"  # alike replies: its count of answers decides
    # a call's id is not part of what was said: a script read again numbers its calls afresh
    model = ScriptedModel.from_script(
        [{"tool_calls": [{"name": "lookup", "args": {"id": 7}}]}, "found it"]
    )
    called = AssistantMessage(parts=(ToolCall(id="call_99", name="lookup", args={"id": 7}),))
    result = ToolResultMessage(call_id="call_99", tool="lookup", content="7")
    assert await answer(model, user("find 7"), called, result) == "found it"
    # a history holding none of the script's replies starts at the top (a script that holds
    # only what is still to come)
    model = ScriptedModel.from_script(["next"])
    assert await answer(model, user("a"), said("elsewhere"), user("b")) == "next"
    assert await answer(model, user("a"), said("next"), user("b")) == (
        "failed: script exhausted: all 1 replies were used"
    )
