"""Model settings as a value, on the agent, per run, from `before_request` and in agent.yaml;
and the settings a provider cannot take, refused before any request. The request bodies each
dialect sends are in test_model_settings_wire.py."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from conftest import drive, scripted
from loopwright import Agent, ConfigError, Hooks, Session
from loopwright.model_settings import ModelSettings, ReasoningBudget, resolve, session_key
from loopwright.project import load_agent
from loopwright.providers import Endpoint, make_model
from loopwright.testing import types

KEY = "TEST_SETTINGS_KEY"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "test-key")


# -- the value -------------------------------------------------------------------------------


def test_settings_are_validated_and_normalised():
    s = ModelSettings(stop="END", reasoning={"budget_tokens": 2048}, extra={"seed": 7})
    assert (s.stop, s.reasoning, s.extra) == (("END",), ReasoningBudget(2048), {"seed": 7})
    assert ModelSettings(stop=["a", "b"]).stop == ("a", "b")
    assert hash(s) == hash(ModelSettings(stop="END", reasoning=ReasoningBudget(2048)))  # a value
    bad = {
        "temperature": (2.5, "temperature must be a number from 0 to 2, not 2.5"),
        "top_p": (True, "top_p must be a number from 0 to 1, not True"),
        "max_output_tokens": (0, "max_output_tokens must be a positive integer, not 0"),
        "stop": ([""], "stop must be non-empty strings"),
        "reasoning": ("max", "reasoning must be one of off, low, medium, high or {budget_tokens"),
        "metadata": ("yes", "metadata must be true or false"),
        "extra": ({1: 2}, "extra must be a mapping of field names"),
    }
    for name, (value, message) in bad.items():
        with pytest.raises(ConfigError) as caught:
            ModelSettings(**{name: value})
        assert str(caught.value).startswith(message), name
    with pytest.raises(ConfigError, match="positive integer"):
        ModelSettings(reasoning={"budget_tokens": 0})
    with pytest.raises(ConfigError, match=r"unknown settings \['temp'\]"):
        ModelSettings.parse({"temp": 0.2})


def test_settings_lay_over_settings_by_field_and_extras_by_key():
    agent = ModelSettings(temperature=0.2, stop=["X"], extra={"a": 1, "b": 1})
    run = ModelSettings(reasoning="low", stop=["Y"], metadata=False, extra={"b": 2})
    assert run.over(agent) == ModelSettings(
        temperature=0.2, stop=["Y"], reasoning="low", metadata=False, extra={"a": 1, "b": 2}
    )
    assert ModelSettings().over(agent) == agent
    # the older max_output_tokens fills the limit only when the settings leave it unset
    assert resolve(ModelSettings(), 100).max_output_tokens == 100
    assert resolve(ModelSettings(max_output_tokens=50), 100).max_output_tokens == 50
    assert session_key("a@b.example") == session_key("a@b.example") != "a@b.example"
    assert len(session_key("a@b.example")) == 32


# -- where settings come from ----------------------------------------------------------------


async def test_a_request_carries_the_agent_settings_then_the_runs_then_the_hooks():
    agent_settings = ModelSettings(temperature=0.2, extra={"a": 1})
    model = scripted("one", "two", "three")

    def hook(info: Any, request: Any) -> Any:
        if request.messages[-1].content != "hooked":
            return None
        return replace(request, settings=replace(request.settings, temperature=0.9))

    hooks = Hooks(before_request=hook)
    agent = Agent(model=model, settings=agent_settings, max_output_tokens=64, hooks=hooks)
    session = Session(agent)
    await drive(session.run("plain"))
    await drive(session.run("per run", settings={"reasoning": "high", "extra": {"b": 2}}))
    await drive(session.run("hooked", settings=ModelSettings(top_p=0.5)))
    first, second, third = (r.settings for r in model.requests)
    assert first == agent_settings
    assert second == ModelSettings(temperature=0.2, reasoning="high", extra={"a": 1, "b": 2})
    assert third == ModelSettings(temperature=0.9, top_p=0.5, extra={"a": 1})
    assert {r.session_id for r in model.requests} == {session.id}
    assert {r.max_output_tokens for r in model.requests} == {64}  # the older field, kept


def test_agent_yaml_settings(tmp_path: Path):
    folder = tmp_path / "agents" / "tuned"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(
        textwrap.dedent(
            """\
            model: "scripted:script.yaml"
            settings:
              temperature: 0.3
              stop: ["</answer>"]
              reasoning: {budget_tokens: 4096}
              extra: {service_tier: flex}
            """
        )
    )
    (folder / "script.yaml").write_text("replies: [ok]\n")
    agent = load_agent(folder)
    assert agent.settings == ModelSettings(
        temperature=0.3,
        stop=("</answer>",),
        reasoning=ReasoningBudget(4096),
        extra={"service_tier": "flex"},
    )
    assert load_agent(folder).settings == agent.settings
    yaml = folder / "agent.yaml"
    yaml.write_text('model: "scripted:script.yaml"\nmax_turns: 3\nsettings:\n  reasoning: max\n')
    with pytest.raises(ConfigError) as caught:
        load_agent(folder)
    assert str(caught.value).startswith(f"{yaml}:3: settings: reasoning must be one of off, low")
    yaml.write_text('model: "scripted:script.yaml"\nsettings: {temprature: 1}\n')
    with pytest.raises(ConfigError, match=r":2: settings: unknown settings \['temprature'\]"):
        load_agent(folder)


# -- what a provider cannot take -------------------------------------------------------------


def untouched(dialect: str, sent: list[Any], name: str = "openai") -> Any:
    """A model whose requests are counted and never answered."""

    async def refuse(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    endpoint = Endpoint(name=name, dialect=dialect, base_url="http://fake", api_key_env=KEY)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(refuse))
    model = "claude-sonnet-4-5" if dialect == "anthropic" else "gpt-5"
    return make_model(endpoint, model, http_client=http)


REFUSED = [
    (
        "openai-responses",
        {"stop": ["END"]},
        "'openai:gpt-5' (openai-responses dialect) cannot "
        "take stop: the Responses API has no stop sequences",
    ),
    (
        "openai-responses",
        {"reasoning": {"budget_tokens": 2000}},
        "'openai:gpt-5' "
        "(openai-responses dialect) cannot take reasoning.budget_tokens: use a level instead",
    ),
    (
        "openai-chat",
        {"reasoning": {"budget_tokens": 2000}},
        "'openai:gpt-5' (openai-chat "
        "dialect) cannot take reasoning.budget_tokens: use a level instead",
    ),
    (
        "anthropic",
        {"reasoning": "high", "temperature": 0.2},
        "'anthropic:claude-sonnet-4-5' "
        "(anthropic dialect) cannot take temperature with reasoning: extended thinking takes only "
        "temperature 1",
    ),
    (
        "anthropic",
        {"reasoning": "low", "top_p": 0.5},
        "cannot take top_p below 0.95 with reasoning: extended thinking takes 0.95 to 1",
    ),
    (
        "anthropic",
        {"reasoning": {"budget_tokens": 1000}},
        "cannot take reasoning.budget_tokens "
        "1000: it must be at least 1024 and below max_tokens (64000)",
    ),
    (
        "anthropic",
        {"reasoning": {"budget_tokens": 4096}, "max_output_tokens": 4096},
        "cannot "
        "take reasoning.budget_tokens 4096: it must be at least 1024 and below max_tokens (4096)",
    ),
    (
        "anthropic",
        {"reasoning": "low", "max_output_tokens": 2000},
        "cannot take reasoning "
        "'low': max_output_tokens 2000 leaves no room for a thinking budget (at least 1024",
    ),
]


@pytest.mark.parametrize(("dialect", "settings", "message"), REFUSED)
async def test_a_setting_the_provider_cannot_take_fails_the_run_before_any_request(
    dialect: str, settings: dict[str, Any], message: str
):
    sent: list[Any] = []
    model = untouched(dialect, sent, "anthropic" if dialect == "anthropic" else "openai")
    on_agent = Session(Agent(model=model, settings=ModelSettings.parse(settings)))
    with pytest.raises(ConfigError, match=r"^model ") as caught:
        on_agent.run("hi")
    assert message in str(caught.value)
    with pytest.raises(ConfigError) as per_run:
        Session(Agent(model=model)).run("hi", settings=settings)
    assert str(per_run.value) == str(caught.value)
    assert sent == [] and not on_agent.busy and on_agent.messages == []
    await model.aclose()


async def test_a_hook_that_sets_what_the_provider_cannot_take_ends_the_run_unsent():
    sent: list[Any] = []
    model = untouched("openai-responses", sent)
    stop = ModelSettings(stop=["END"])
    hooks = Hooks(before_request=lambda info, request: replace(request, settings=stop))
    result = await drive(Session(Agent(model=model, hooks=hooks)).run("hi"))
    assert result.stop_reason == "error" and sent == []
    assert types(result.events)[-2:] == ["loop:error", "done"]
    assert "ConfigError: model 'openai:gpt-5' (openai-responses dialect) cannot take stop" in (
        result.text
    )
    await model.aclose()


async def test_the_scripted_model_takes_any_setting():
    model = scripted("ok")
    settings = ModelSettings(stop=["X"], reasoning=ReasoningBudget(10), temperature=1.5)
    result = await drive(Session(Agent(model=model, settings=settings)).run("hi"))
    assert result.text == "ok" and model.requests[0].settings == settings


# -- docs/models.md --------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def doc_blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(), re.S | re.M)


def test_models_doc_runs_as_written(tmp_path: Path):
    code = "\n\n".join(doc_blocks("python"))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == doc_blocks("text")[0]


async def test_models_doc_yaml_and_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "agents" / "thinker"
    folder.mkdir(parents=True)
    yaml = doc_blocks("yaml")[0]  # (the second: fallback models, tests/test_fallback.py)
    (folder / "agent.yaml").write_text(yaml)
    assert load_agent(folder).settings == ModelSettings(
        temperature=1,
        max_output_tokens=16000,
        reasoning=ReasoningBudget(8000),
        stop=("</answer>",),
        metadata=True,
        extra={"top_k": 40},
    )
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    agent = Agent(model="openai-responses:gpt-5", settings=ModelSettings(stop=["x"]))
    with pytest.raises(ConfigError) as caught:
        Session(agent).run("hi")
    assert f"ConfigError: {caught.value}\n" == doc_blocks("text")[1]


async def test_agent_settings_given_as_a_mapping_work_too():
    model = scripted("ok")
    agent = Agent(model=model, settings={"temperature": 0.5})  # type: ignore[arg-type]
    await drive(Session(agent).run("hi"))
    assert model.requests[0].settings == ModelSettings(temperature=0.5)
    with pytest.raises(ConfigError, match="unknown settings"):
        Session(Agent(model=scripted(), settings={"temp": 1})).run("hi")  # type: ignore[arg-type]
