"""Structured output: the final answer checked against the agent's output type or schema, a
wrong answer asked again within `output_retries`, the value on `RunResult.output`; the
final-answer tool for models without native structured output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import call, drive, run_agent
from loopwright import Agent, Session
from loopwright import events as ev
from loopwright.errors import ConfigError
from loopwright.loop.output import FINAL_ANSWER, Output
from loopwright.messages import AssistantMessage, Text, UserMessage
from loopwright.models import ModelRequest
from loopwright.state.replay import fold
from loopwright.testing import ScriptedModel, types


class City(BaseModel):
    name: str
    population: int


NOTE = (
    "[Your final answer does not fit the required output schema:\n"
    "- population: Input should be a valid integer, unable to parse string as an integer\n"
    "Answer again with the corrected JSON only.]"
)


def model(*replies: Any) -> ScriptedModel:
    return ScriptedModel.from_script(list(replies))


async def test_an_invalid_answer_is_asked_again_and_the_valid_one_is_the_output():
    scripted = model(
        '{"name": "Lyon", "population": "many"}', '{"name": "Lyon", "population": 522250}'
    )
    result = await run_agent(Agent(model=scripted, output_type=City), "the third city of France")
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "text:delta",
        "text:delta",
        "text:delta",
        "message:completed",
        "step:finished",
        "output:invalid",
        "step:started",
        "budget:check",
        "text:delta",
        "text:delta",
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    invalid = result.events[9]
    assert invalid == ev.OutputInvalid(
        errors=[
            "population: Input should be a valid integer, unable to parse string as an integer"
        ],
        message=UserMessage(content=NOTE),
    )
    assert result.output == City(name="Lyon", population=522250)
    assert isinstance(result.output, City)
    assert result.text == '{"name":"Lyon","population":522250}'  # the value's own JSON
    assert result.events[-2] == ev.LoopDone(text=result.text)
    assert (result.stop_reason, result.stop_detail) == ("completed", None)
    # every request carried the schema; the second one the note after the wrong answer
    first, second = scripted.requests
    assert first.output == second.output
    assert first.output is not None and first.output.name == "City"
    assert first.output.schema == City.model_json_schema()
    assert second.messages[-1] == UserMessage(content=NOTE)
    assert isinstance(second.messages[-2], AssistantMessage)


async def test_past_the_re_asks_the_run_ends_with_an_error_naming_what_failed():
    scripted = model("not json", '{"name": 1}', '{"name": "x"}')
    agent = Agent(model=scripted, output_type=City, output_retries=1)
    result = await run_agent(agent)
    assert types(result.events)[-4:] == ["message:completed", "step:finished", "loop:error", "done"]
    assert [e.errors for e in result.events if isinstance(e, ev.OutputInvalid)] == [
        ["the answer is not JSON (Expecting value: line 1 column 1 (char 0))"]
    ]
    assert result.stop_reason == "error"
    assert result.text == (
        "Error: OutputFailed: the final answer does not fit the output schema after 1 re-ask: "
        "name: Input should be a valid string; population: Field required"
    )
    assert result.output is None
    assert scripted.unused == 1


async def test_output_schema_checks_with_jsonschema_and_gives_plain_json():
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "required": ["tags"],
    }
    scripted = model('```json\n{"tags": []}\n```', '```json\n{"tags": ["a", "b"]}\n```')
    result = await run_agent(Agent(model=scripted, output_schema=schema))
    [invalid] = [e for e in result.events if isinstance(e, ev.OutputInvalid)]
    assert invalid.errors == ["tags: [] should be non-empty"]
    assert result.output == {"tags": ["a", "b"]}
    assert result.text == '{"tags": ["a", "b"]}'


async def test_a_value_that_is_not_an_object_travels_wrapped():
    scripted = model('{"value": [1, 2, "x"]}', '{"value": [1, 2, 3]}')
    result = await run_agent(Agent(model=scripted, output_type=list[int]))
    assert result.output == [1, 2, 3]
    assert result.text == "[1,2,3]"
    output = scripted.requests[0].output
    assert output is not None
    assert output.schema == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"type": "integer"}}},
        "required": ["value"],
        "additionalProperties": False,
    }
    assert output.strict  # closed, every property required: OpenAI may decode strictly
    [invalid] = [e for e in result.events if isinstance(e, ev.OutputInvalid)]
    assert invalid.errors == [
        "2: Input should be a valid integer, unable to parse string as an integer"
    ]


async def test_the_answer_after_tool_calls_is_checked_and_replay_rebuilds_the_history():
    from loopwright import tool

    @tool
    def lookup(city: str) -> int:
        """Population of a city."""
        return 522250

    scripted = model(
        {"tool_calls": [call("lookup", city="Lyon")]},
        "Lyon has 522250 people.",
        '{"name": "Lyon", "population": 522250}',
    )
    session = Session(Agent(model=scripted, tools=[lookup], output_type=City))
    result = await drive(session.run("how many in Lyon?"))
    assert result.output == City(name="Lyon", population=522250)
    state = fold(result.events, {})
    assert state.history.messages == session.history.messages
    notes = [m for m in session.history.messages if isinstance(m, UserMessage)]
    assert [n.content.startswith("[Your final answer does not fit") for n in notes] == [
        False,
        True,
    ]


def test_output_configuration_errors_name_the_agent():
    with pytest.raises(ConfigError, match="give output_type or output_schema, not both"):
        Agent(model="scripted:x", output_type=City, output_schema={"type": "object"})
    with pytest.raises(ConfigError, match="output_schema is not a valid JSON Schema"):
        Agent(model="scripted:x", output_schema={"type": "thing"})
    with pytest.raises(ConfigError, match="agent 'a': output_type"):
        Agent(model="scripted:x", name="a", output_type=object())
    agent = Agent(model="scripted:x", output_schema={"type": "object"})
    assert hash(agent) == hash(agent)  # a schema (a dict) leaves the agent hashable


# -- the final-answer tool, for a model without native structured output ---------------------


def answer(call_id: str, **args: Any) -> dict[str, Any]:
    """A scripted call of the final-answer tool."""
    return {"name": FINAL_ANSWER, "args": args, "id": call_id}


class Plain:
    """A model without `native_output`: it gets the final-answer tool."""

    def __init__(self, scripted: ScriptedModel) -> None:
        self.scripted = scripted
        self.name = scripted.name

    def stream(self, request: ModelRequest) -> Any:
        return self.scripted.stream(request)


async def test_a_model_without_native_output_answers_through_the_final_answer_tool():
    scripted = model(
        {"text": "Here:", "tool_calls": [answer("fa_1", name="Lyon", population="x")]},
        {"tool_calls": [answer("fa_2", name="Lyon", population=522250)]},
    )
    result = await run_agent(Agent(model=Plain(scripted), output_type=City))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "text:delta",  # "Here:" as it streamed
        "text:delta",  # the answer's JSON: the call is the reply's text
        "message:completed",
        "step:finished",
        "output:invalid",
        "step:started",
        "budget:check",
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    first = result.events[6]
    assert isinstance(first, ev.MessageCompleted)
    assert first.message.parts == (Text(text='{"name": "Lyon", "population": "x"}'),)
    assert first.message.stop_reason == "end_turn"
    assert result.output == City(name="Lyon", population=522250)
    request = scripted.requests[0]
    assert request.output is None  # the provider is not asked for native output
    [spec] = request.tools
    assert (spec.name, spec.parameters) == (FINAL_ANSWER, City.model_json_schema())


async def test_output_mode_tool_uses_the_tool_even_where_native_output_exists():
    scripted = model({"tool_calls": [answer("fa_1", name="Lyon", population=1)]})
    result = await run_agent(Agent(model=scripted, output_type=City, output_mode="tool"))
    assert result.output == City(name="Lyon", population=1)
    assert [t.name for t in scripted.requests[0].tools] == [FINAL_ANSWER]


def test_the_check_reads_fenced_json_and_reports_every_problem():
    output = Output.of(City, None)
    assert output is not None
    assert output.check('```\n{"name": "A", "population": 3}\n```') == (
        '{"name":"A","population":3}',
        [],
    )
    assert output.check("{}") == ("", ["name: Field required", "population: Field required"])
    assert json.loads(output.check('{"name": "A", "population": "4"}')[0]) == {
        "name": "A",
        "population": 4,
    }


def test_agent_yaml_output_schema(tmp_path: Path):
    from loopwright.project import load_agent

    folder = tmp_path / "agents" / "tagger"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(
        "model: scripted:script.yaml\n"
        "output_schema:\n"
        "  type: object\n"
        "  properties: {tags: {type: array, items: {type: string}}}\n"
        "  required: [tags]\n"
        "output_retries: 1\n"
        "continue_truncated: 2\n"
    )
    agent = load_agent(folder)
    assert agent.output is not None
    assert agent.output.format.schema["required"] == ["tags"]
    assert (agent.output_retries, agent.continue_truncated) == (1, 2)


def test_the_docs_example_runs_as_written(tmp_path: Path):
    import re
    import subprocess
    import sys

    doc = (Path(__file__).resolve().parents[1] / "docs" / "output.md").read_text()
    [code] = re.findall(r"^```python\n(.*?)^```$", doc, re.S | re.M)
    [printed] = re.findall(r"^```text\n(.*?)^```$", doc, re.S | re.M)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == printed
    [yaml_block] = re.findall(r"^```yaml\n(.*?)^```$", doc, re.S | re.M)
    folder = tmp_path / "agents" / "tags"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(yaml_block)
    from loopwright.project import load_agent

    agent = load_agent(folder)
    assert agent.output is not None and agent.output_retries == 2
