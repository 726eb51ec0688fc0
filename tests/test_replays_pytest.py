"""The pytest plugin `loopwright.replays.pytest`, driven by real pytest runs (`pytester`) over
a folder of sessions exported from a real store: one test per file, the unchanged one passing,
the changed one failing with the replay's report; configured on the command line or in the ini
file; inert in a suite that does not ask for it. And the examples project's own replay test."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from loopwright import tool
from loopwright.project import load_project
from loopwright.runtime import Runtime
from loopwright.store.export import export_jsonl
from loopwright.store.log import SessionKey
from loopwright.store.sqlite_log import SQLiteLog

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
AGENT_PY = """\
from loopwright import Agent, tool
from loopwright.testing import ScriptedModel


@tool
def lookup(order: str) -> str:
    \"\"\"Look an order up.\"\"\"
    return f"{order}: delivered"


replies = [{"tool_calls": [{"name": "lookup", "args": {"order": "A1"}, "id": "c1"}]}, "On its way."]
agent = Agent(name="shop", model=ScriptedModel.from_script(replies), tools=[lookup])
"""
PLUGIN = ("-p", "loopwright.replays.pytest")
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"  # (pytest-asyncio's, unwarned)


@tool(name="lookup")
def lookup_lost(order: str) -> str:
    """Look an order up (the version the `changed` session was recorded with)."""
    return f"{order}: lost"


@pytest.fixture
def shop(pytester: pytest.Pytester) -> Path:
    """A project with the `shop` agent and sessions/: `same.jsonl`, recorded with today's
    agent, and `changed.jsonl`, recorded when its lookup said the order was lost."""
    root = pytester.path
    pytester.makeini(INI)
    (root / "loopwright.toml").write_text("")
    (root / "agents" / "shop").mkdir(parents=True)
    (root / "agents" / "shop" / "agent.py").write_text(AGENT_PY)
    today = load_project(root).agents["shop"]
    before = dataclasses.replace(today, tools=[lookup_lost])
    (root / "sessions").mkdir()

    async def record() -> None:
        log = SQLiteLog(root / "store.db")
        for name, agent in (("same", today), ("changed", before)):
            runtime = Runtime({"shop": agent}, log)
            live = await runtime.send("default", "shop", name, "Where is A1?")
            await live.wait()
            with (root / "sessions" / f"{name}.jsonl").open("w") as out:
                await export_jsonl(log, SessionKey("default", "shop", name), out)
            await runtime.close()
        await log.close()

    asyncio.run(record())
    return root


FAILED = [
    "*replay of session changed (agent shop, model recorded): 1 change",
    'turn 1 · "Where is A1?"',
    "  call 1 lookup · result: A1: lost → A1: delivered",
]


def test_a_folder_of_sessions_is_one_test_per_file(shop: Path, pytester: pytest.Pytester) -> None:
    options = ["--loopwright-replay", "sessions", "--loopwright-agent", "shop", "-v"]
    result = pytester.runpytest(*PLUGIN, *options)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*sessions/changed.jsonl::changed FAILED*"])
    result.stdout.fnmatch_lines(["*sessions/same.jsonl::same PASSED*"])
    result.stdout.fnmatch_lines(FAILED, consecutive=True)


def test_the_ini_file_configures_it(shop: Path, pytester: pytest.Pytester) -> None:
    pytester.makeini(
        INI + "addopts = -p loopwright.replays.pytest\n"
        "loopwright_replay = sessions\nloopwright_replay_agent = shop\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(FAILED, consecutive=True)


def test_a_suite_that_does_not_ask_is_left_alone(shop: Path, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    for options in ((), PLUGIN):
        result = pytester.runpytest(*options)
        result.assert_outcomes(passed=1)
    result = pytester.runpytest(*PLUGIN, "--loopwright-replay", "sessions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--loopwright-replay needs --loopwright-agent NAME*"])


def test_the_examples_project_replays_its_sessions() -> None:
    """examples/test_sessions.py, run as the docs say (its own pytest run, in examples/)."""
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_sessions.py"],
        cwd=ROOT / "examples",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "2 passed" in ran.stdout
