"""Fallback models: a model that fails past its retries hands the rest of the run to the next
one, with a `model:fallback` event; the history does not change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent
from loopwright import Agent, RetryPolicy, Session, tool
from loopwright import events as ev
from loopwright.errors import ConfigError
from loopwright.model_settings import ModelSettings
from loopwright.state.replay import fold
from loopwright.testing import ScriptedModel, types

NO_WAIT = RetryPolicy(attempts=2, backoff=0)
BUSY = {"fail": {"error": "overloaded", "retryable": True}}


def model(name: str, *replies: Any) -> ScriptedModel:
    return ScriptedModel.from_script(list(replies), name=f"scripted:{name}")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_a_model_failing_past_its_retries_hands_the_request_to_the_fallback():
    primary = model("primary", BUSY, BUSY, BUSY, "never")
    backup = model("backup", "From the backup.")
    agent = Agent(model=primary, fallback_models=[backup], retry=NO_WAIT)
    result = await run_agent(agent)
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "model:retry",
        "model:retry",
        "model:fallback",
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    switch = result.events[6]
    assert switch == ev.ModelFallback(
        from_="scripted:primary", to="scripted:backup", error="overloaded"
    )
    assert result.text == "From the backup."
    assert (len(primary.requests), len(backup.requests)) == (3, 1)
    assert backup.requests[0].messages == primary.requests[0].messages  # the same request


async def test_a_failure_no_retry_helps_switches_at_once():
    primary = model("primary", {"fail": "HTTP 401: invalid x-api-key"}, "never")
    backup = model("backup", "fine")
    result = await run_agent(Agent(model=primary, fallback_models=[backup], retry=NO_WAIT))
    assert types(result.events)[3:6] == ["budget:check", "model:fallback", "text:delta"]
    assert result.events[4].error == "HTTP 401: invalid x-api-key"
    assert result.text == "fine"


async def test_each_fallback_gets_the_whole_retry_policy_then_the_run_fails_as_usual():
    """The second model retries twice on its own (the request's count and the run's budget
    start afresh with it); when it fails for good too, the run ends with `loop:error` naming its
    failure, as a run without fallback models does."""
    primary = model("primary", {"fail": "HTTP 401: bad key"})
    backup = model("backup", BUSY, BUSY, {"fail": {"error": "still overloaded", "retryable": True}})
    agent = Agent(
        model=primary, fallback_models=[backup], retry=RetryPolicy(attempts=2, backoff=0, budget=2)
    )
    result = await run_agent(agent)
    assert types(result.events)[3:] == [
        "budget:check",
        "model:fallback",
        "model:retry",
        "model:retry",
        "step:finished",
        "loop:error",
        "done",
    ]
    assert [e.attempt for e in result.events if isinstance(e, ev.ModelRetry)] == [1, 2]
    assert result.events[-2].error == "model request failed: still overloaded"
    assert result.stop_reason == "error"


async def test_models_are_tried_in_order_each_once():
    first = model("first", {"fail": "down"})
    second = model("second", {"fail": "down too"})
    third = model("third", "third time lucky")
    agent = Agent(model=first, fallback_models=[second, third], retry=NO_WAIT)
    result = await run_agent(agent)
    switches = [(e.from_, e.to, e.error) for e in result.events if isinstance(e, ev.ModelFallback)]
    assert switches == [
        ("scripted:first", "scripted:second", "down"),
        ("scripted:second", "scripted:third", "down too"),
    ]
    assert result.text == "third time lucky"


async def test_the_switch_lasts_for_the_run_and_the_next_run_starts_with_the_agents_model():
    primary = model("primary", {"fail": "down"}, "primary again")
    backup = model("backup", {"tool_calls": [call("add", a=1, b=2)]}, "3", "never")
    agent = Agent(model=primary, tools=[add], fallback_models=[backup], retry=NO_WAIT)
    session = Session(agent)
    first = await drive(session.run("add"))
    assert types(first.events).count("model:fallback") == 1
    assert (len(primary.requests), len(backup.requests)) == (1, 2)  # step 2 asked the backup
    assert first.text == "3"
    second = await drive(session.run("again"))
    assert "model:fallback" not in types(second.events)
    assert second.text == "primary again"


async def test_a_switch_changes_nothing_in_the_history():
    """Replaying the run's events gives the live history: the switch is no message, and the
    failed attempt's streamed text rides into the fallback's request as a note, as on a retry."""
    primary = model("primary", {"fail": {"error": "cut", "after_text": "Let me"}})
    backup = model("backup", "Done.")
    session = Session(Agent(model=primary, fallback_models=[backup], retry=NO_WAIT))
    result = await drive(session.run("go"))
    assert fold(result.events, {}).history.messages == session.history.messages
    assert [m.role for m in session.history.messages] == ["user", "assistant"]
    assert backup.requests[0].notes == ("[Your previous attempt was cut off after: Let me]",)


async def test_a_runs_retry_budget_spent_switches_too():
    """With the run's retry budget spent, a retryable failure is final: it switches (and the
    fallback has the budget afresh)."""
    primary = model("primary", BUSY, BUSY, "never")
    backup = model("backup", BUSY, "fine")
    agent = Agent(
        model=primary, fallback_models=[backup], retry=RetryPolicy(attempts=5, backoff=0, budget=1)
    )
    result = await run_agent(agent)
    assert [t for t in types(result.events) if t.startswith("model:")] == [
        "model:retry",
        "model:fallback",
        "model:retry",
    ]
    assert result.text == "fine"


class Picky(ScriptedModel):
    """A model that takes no temperature (as a model of your own may say)."""

    def check_settings(self, settings: ModelSettings) -> None:
        if settings.temperature is not None:
            raise ConfigError(f"model {self.name!r} cannot take temperature")


async def test_settings_a_fallback_cannot_take_are_refused_before_any_request():
    primary = model("primary", "never")
    picky = Picky.from_script(["never"], name="scripted:picky")
    agent = Agent(model=primary, fallback_models=[picky], settings=ModelSettings(temperature=0.2))
    session = Session(agent)
    with pytest.raises(ConfigError, match="'scripted:picky' cannot take temperature"):
        session.run("go")
    assert primary.requests == [] and session.history.messages == []
    with pytest.raises(ConfigError, match="picky"):  # a run's own settings are checked too
        Session(replace(agent, settings=ModelSettings())).run("go", settings={"temperature": 1})


async def test_an_unknown_fallback_model_is_refused_when_the_run_starts():
    agent = Agent(model=model("primary", "never"), fallback_models="nowhere:model")
    assert agent.fallback_models == ("nowhere:model",)  # one string is one model
    with pytest.raises(ConfigError, match="unknown model 'nowhere:model'"):
        Session(agent).run("go")


def test_agent_yaml_fallback(tmp_path: Path):
    from loopwright.project import load_agent

    folder = tmp_path / "desk"
    folder.mkdir()
    (folder / "agent.yaml").write_text(
        "model: scripted:main.yaml\nfallback:\n  - scripted:spare.yaml\n  - openai:gpt-5-mini\n"
    )
    agent = load_agent(folder)
    assert agent.fallback_models == (f"scripted:{folder / 'spare.yaml'}", "openai:gpt-5-mini")
    (folder / "agent.yaml").write_text("model: scripted:main.yaml\nfallback: [nowhere:x]\n")
    with pytest.raises(ConfigError, match="unknown model 'nowhere:x'") as caught:
        load_agent(folder)
    assert caught.value.source == f"{folder / 'agent.yaml'}:2"


def test_the_docs_agent_yaml_names_its_fallback_models(tmp_path: Path):
    from loopwright.project import load_agent
    from test_model_settings import doc_blocks

    (tmp_path / "desk").mkdir()
    (tmp_path / "desk" / "agent.yaml").write_text(doc_blocks("yaml")[1])
    assert load_agent(tmp_path / "desk").fallback_models == (
        "openai:gpt-5-mini",
        "deepseek:deepseek-chat",
    )


async def test_the_chat_span_names_the_model_that_answered(tmp_path: Path):
    """An agent whose model is a string: its chat spans name that model as requested, until
    a switch; then the fallback (and the switch counts as a retry of the request)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from loopwright import telemetry

    (tmp_path / "primary.yaml").write_text('- fail: "HTTP 401: bad key"\n')
    (tmp_path / "backup.yaml").write_text("- Fine.\n")
    primary, backup = (
        f"scripted:{tmp_path / 'primary.yaml'}",
        f"scripted:{tmp_path / 'backup.yaml'}",
    )
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(provider, capture_content=False)
    try:
        await run_agent(Agent(model=primary, fallback_models=[backup], retry=NO_WAIT))
    finally:
        telemetry.disable()
        provider.shutdown()
    [chat] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.request.model"] == str(tmp_path / "backup.yaml")
    assert attributes["loopwright.model.retries"] == 1


def test_loopwright_run_says_when_it_switches(tmp_path: Path):
    import subprocess

    from test_cli import LOOPWRIGHT
    from test_cli_project import ENV

    folder = tmp_path / "agents" / "desk"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(
        "model: scripted:main.yaml\nfallback: [scripted:spare.yaml]\nretry: {attempts: 0}\n"
    )
    (folder / "main.yaml").write_text('- fail: "HTTP 529: overloaded"\n')
    (folder / "spare.yaml").write_text("- From the spare.\n")
    (tmp_path / "loopwright.toml").write_text("")
    out = subprocess.run(
        [LOOPWRIGHT, "run", "desk", "hi", "--project", str(tmp_path)],
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # (a safety net)
    )
    assert (out.returncode, out.stdout) == (0, "From the spare.\n")
    spare = f"scripted:{folder / 'spare.yaml'}"
    note = f"↷ model request failed (HTTP 529: overloaded); switching to {spare}"
    assert note in out.stderr.splitlines()


async def test_the_switch_is_logged_and_the_log_gives_the_same_history(tmp_path: Path):
    """In a durable session the `model:fallback` is in the log, and a session opened again
    from the log has the history the run left."""
    from loopwright.runtime import Settings
    from loopwright.runtime.journal import session_in_log
    from loopwright.store.log import SessionKey
    from loopwright.store.sqlite_log import SQLiteLog

    primary = model("primary", {"fail": "HTTP 401: bad key"})
    backup = model("backup", "Fine.", "Again.")
    agent = Agent(model=primary, fallback_models=[backup], retry=NO_WAIT)
    key = SessionKey("default", agent.name, "s-1")
    log = SQLiteLog(tmp_path / "log.db")
    try:
        session = await session_in_log(log, agent, key, Settings())
        await drive(session.run("go"))
        stored = [s.event for s in await log.read(key)]
        [switch] = [e for e in stored if isinstance(e, ev.ModelFallback)]
        assert (switch.from_, switch.to) == ("scripted:primary", "scripted:backup")
        again = await session_in_log(log, agent, key, Settings())
        assert again.messages == session.messages
    finally:
        await log.close()


async def test_a_fallback_too_short_for_the_prompt_compacts_it_once_too():
    """A model refusing the prompt as too long compacts the history once; its fallback gets
    that once as well (without it, the fallback's refusal would end the run)."""
    too_long = {"fail": {"error": "prompt is too long", "prompt_too_long": True}}
    primary = model("primary", "one", "two", "three", too_long, "Summary 1.", too_long)
    backup = model("backup", too_long, "Fine.")  # (just compacted: nothing more to summarise)
    agent = Agent(model=primary, fallback_models=[backup], retry=NO_WAIT)
    session = Session(agent)
    for text in ("a", "b", "c"):
        await drive(session.run(text))
    result = await drive(session.run("d"))
    steps = [t for t in types(result.events) if t.startswith(("model:", "prompt:"))]
    assert steps == ["prompt:compaction", "model:fallback", "prompt:compaction"]
    assert result.text == "Fine."


def test_a_providers_refusal_of_a_setting_names_the_fallback(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    agent = Agent(
        model=model("primary", "never"),
        fallback_models=["openai-responses:gpt-5"],
        settings=ModelSettings(stop=["END"]),
    )
    with pytest.raises(ConfigError) as caught:
        Session(agent).run("go")
    assert str(caught.value) == (
        "model 'openai-responses:gpt-5' (openai-responses dialect) cannot take stop: "
        "the Responses API has no stop sequences"
    )
