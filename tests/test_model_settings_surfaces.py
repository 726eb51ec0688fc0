"""Model settings where people give and read them: a message's `settings` over HTTP, `loopwright
run --setting`, the agent's settings in `GET /agents/NAME/config` and `agents --show`, and the
compaction summary's request."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import drive
from live_server import LiveServer
from loopwright import Agent, Session
from loopwright.cli.common import CliError
from loopwright.cli.run import run_settings
from loopwright.errors import ConfigError
from loopwright.model_settings import ModelSettings, ReasoningBudget
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.state.compaction import SUMMARY_SYSTEM, Compaction
from loopwright.testing import ScriptedModel
from test_cli import LOOPWRIGHT
from test_cli_project import ENV, lw

AGENT_YAML = """\
model: scripted:script.json
fallback: [scripted:spare.json]
settings:
  temperature: 0.3
  reasoning: low
  extra: {service_tier: flex}
"""


class Picky(ScriptedModel):
    """Takes no top_p (as a model of your own may say, through `check_settings`)."""

    def check_settings(self, settings: ModelSettings) -> None:
        if settings.top_p is not None:
            raise ConfigError(f"model {self.name!r} cannot take top_p")


def project(root: Path) -> Path:
    folder = root / "agents" / "desk"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(AGENT_YAML)
    for script in ("script.json", "spare.json"):
        (folder / script).write_text(json.dumps({"replies": ["Noted."] * 9}))
    (root / "loopwright.toml").write_text("")
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Picky]]:
    root = project(tmp_path_factory.mktemp("settings"))
    loaded = load_project(root)
    model = Picky.from_script(["Noted."] * 9, name="scripted:picky")
    loaded.agents["desk"] = replace(loaded.agents["desk"], model=model)
    with LiveServer(create_app(loaded)) as live:
        live.root = root
        yield live, model


def test_a_messages_settings_reach_the_model_over_the_agents(served):
    server, model = served
    with server.client() as http:
        body = {"message": "hi", "settings": {"temperature": 0.9, "stop": ["END"]}}
        answer = http.post("/agents/desk/messages", json=body)
        assert answer.status_code == 200, answer.text
    assert model.requests[-1].settings == ModelSettings(
        temperature=0.9, reasoning="low", stop=("END",), extra={"service_tier": "flex"}
    )


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"temperature": 9}, "settings: temperature must be a number from 0 to 2, not 9"),
        ({"temp": 1}, "settings: unknown settings ['temp'] (known: temperature, top_p, stop, "),
        ({"reasoning": "max"}, "settings: reasoning must be one of off, low, medium, high"),
        ([1], "settings: settings must be a mapping, not list"),
        ({"top_p": 0.5}, "model 'scripted:picky' cannot take top_p"),
    ],
)
def test_settings_invalid_or_refused_are_a_400_before_any_request(served, settings, error):
    server, model = served
    before = len(model.requests)
    with server.client() as http:
        answer = http.post("/agents/desk/messages", json={"message": "hi", "settings": settings})
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(error)
    assert len(model.requests) == before


def test_the_agents_settings_and_fallback_in_its_config(served):
    server, _ = served
    with server.client() as http:
        config = http.get("/agents/desk/config").json()
    assert config["settings"] == {
        "temperature": 0.3,
        "reasoning": "low",
        "extra": {"service_tier": "flex"},
    }
    assert config["fallbackModels"] == [f"scripted:{server.root}/agents/desk/spare.json"]


def test_cli_run_settings_and_agents_show(tmp_path: Path):
    root = project(tmp_path)
    out = lw(root, "run", "desk", "hi", "--setting", "temperature=0.1")
    assert (out.returncode, out.stdout) == (0, "Noted.\n")
    out = lw(root, "run", "desk", "hi", "--setting", "temperature=7")
    assert out.returncode != 0
    assert "--setting: temperature must be a number from 0 to 2, not 7" in out.stderr
    out = lw(root, "agents", "--show", "desk")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"fallback: scripted:{root}/agents/desk/spare.json" in lines
    assert 'settings: temperature=0.3 · reasoning=low · extra={"service_tier": "flex"}' in lines
    shown = json.loads(lw(root, "agents", "--show", "desk", "--json").stdout)
    assert shown["settings"]["extra"] == {"service_tier": "flex"}


def test_cli_settings_are_read_as_yaml():
    given = ["temperature=0.2", "reasoning={budget_tokens: 8000}", "stop=[END, STOP]"]
    assert run_settings(given) == ModelSettings(
        temperature=0.2, reasoning=ReasoningBudget(8000), stop=("END", "STOP")
    )
    assert run_settings([]) is None
    with pytest.raises(CliError, match="is not KEY=VALUE"):
        run_settings(["temperature"])


def test_a_refused_cli_setting_names_the_model(tmp_path: Path):
    root = project(tmp_path)
    folder = root / "agents" / "desk"
    (folder / "agent.yaml").write_text("model: openai-responses:gpt-5\n")
    env_key = {**ENV, "OPENAI_API_KEY": "test-key"}
    out = subprocess.run(
        [LOOPWRIGHT, "run", "desk", "hi", "--setting", "stop=[END]", "--project", str(root)],
        env=env_key,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "cannot take stop: the Responses API has no stop sequences" in out.stderr


async def test_the_compaction_summary_is_asked_with_the_runs_settings():
    """Sampling, metadata and extras as the run asks; the summary's own output bound; no
    reasoning and no stop sequences."""
    model = ScriptedModel.from_script(["one", "two", "three", "The summary."])
    settings = ModelSettings(
        temperature=0.2, reasoning="high", stop=["END"], max_output_tokens=4000, extra={"k": 1}
    )
    agent = Agent(model=model, settings=settings, compaction=Compaction(keep_last=1))
    session = Session(agent)
    for text in ("a", "b", "c"):
        await drive(session.run(text, settings={"top_p": 0.9}))
    await drive(session.compact())
    summary = model.requests[-1]
    assert summary.system == SUMMARY_SYSTEM
    assert summary.settings == ModelSettings(
        temperature=0.2, max_output_tokens=1024, extra={"k": 1}
    )
    assert summary.session_id == session.id
