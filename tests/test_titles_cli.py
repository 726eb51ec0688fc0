"""Model-written titles in the terminal: `loopwright run` and `loopwright chat` on a project
with `[titles]` (a scripted title model, which answers at once) title the sessions they start
and wait for the title before the process exits, so `loopwright sessions list` shows it; a
title model that does not answer is given up at exit (`runner.titled`, its wait bounded), and
the session keeps its first message."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
from pathlib import Path

import pytest

from chat_terminal import Pane, needs_tmux
from live_server import write
from loopwright import Agent
from loopwright.cli.runner import titled
from loopwright.runtime import Runtime
from loopwright.runtime.titling import Titler, Titles
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log
from loopwright.testing import FunctionModel, ScriptedModel
from test_chat import ENV as CHAT_ENV
from test_cli import ENV, LOOPWRIGHT

TITLE = "Parcel P-7 on its way"
CLERK = {
    "agent.yaml": """\
        description: Answers about parcels.
        model: scripted:script.yaml
        """,
    "script.yaml": """\
        replies:
          - text: It left the depot this morning.
          - text: You're welcome.
        """,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "parcels"
    root.mkdir()
    script = tmp_path / "titles.yaml"
    script.write_text(f"replies:\n  - text: {TITLE}\n")
    (root / "loopwright.toml").write_text(f'[titles]\nmodel = "scripted:{script}"\n')
    write(root / "agents" / "clerk", CLERK)
    return root


def lw(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOOPWRIGHT, *args], cwd=project, env=ENV, capture_output=True, text=True, timeout=60
    )


def listed(project: Path) -> list[tuple[str, str]]:
    out = lw(project, "sessions", "list", "--json")
    assert out.returncode == 0, out.stderr
    return [(row["id"], row["title"]) for row in map(json.loads, out.stdout.splitlines())]


def test_run_titles_the_session_it_starts(project: Path) -> None:
    ran = lw(project, "run", "clerk", "where is my parcel P-7?", "--json")
    assert ran.returncode == 0, ran.stderr
    [session] = [json.loads(line) for line in ran.stdout.splitlines()][:1]
    assert session["type"] == "session"
    assert listed(project) == [(session["sessionId"], TITLE)]
    again = lw(project, "run", "clerk", "thanks", "--session", session["sessionId"])
    assert again.returncode == 0, again.stderr
    assert listed(project) == [(session["sessionId"], TITLE)]  # titled once


@needs_tmux
def test_chat_titles_the_conversation_it_starts(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "tmux"
    home.mkdir()
    pane = Pane(home, [LOOPWRIGHT, "chat", "clerk"], project, CHAT_ENV)
    try:
        pane.wait("clerk · a new conversation · /help for help")
        pane.type("where is my parcel P-7?")
        pane.wait(lambda s: "— 1 model request" in s and s.endswith("›"))
        pane.keys("C-d")
        pane.wait("[exit 0]")
    finally:
        pane.close()
    [(_, title)] = listed(project)
    assert title == TITLE


async def test_a_title_model_that_does_not_answer_is_given_up_at_exit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asked = asyncio.Event()

    async def never(request: object) -> str:
        asked.set()
        await asyncio.Event().wait()  # (cancelled by `titled`)
        raise AssertionError("unreachable")

    log = await open_log(tmp_path / "loopwright.db")
    titler = Titler(Titles(FunctionModel(never)), log)
    clerk = Agent(name="clerk", model=ScriptedModel.from_script(["It left the depot."]))
    runtime = Runtime({"clerk": clerk}, log, observers=titler.observers())
    try:
        live = await runtime.send("default", "clerk", "s1", "where is my parcel P-7?")
        await live.task
        await asyncio.wait_for(asked.wait(), 60)  # (a safety net: the title was asked for)
        with caplog.at_level(logging.WARNING, logger="loopwright.cli"):
            await titled(titler, wait=0)
        assert not titler._tasks  # cancelled, not left running
        assert [r.getMessage() for r in caplog.records if r.name == "loopwright.cli"] == [
            "a session title was not written within 0s; it is given up"
        ]
        record = await runtime.session(SessionKey("default", "clerk", "s1"))
        assert record.title is None  # the first message titles it
    finally:
        await runtime.close()
        await log.close()


async def test_exit_waits_for_a_title_being_written(tmp_path: Path) -> None:
    asked, answer = asyncio.Event(), asyncio.Event()

    async def later(request: object) -> str:
        asked.set()
        await answer.wait()
        return TITLE

    log = await open_log(tmp_path / "loopwright.db")
    titler = Titler(Titles(FunctionModel(later)), log)
    clerk = Agent(name="clerk", model=ScriptedModel.from_script(["It left the depot."]))
    runtime = Runtime({"clerk": clerk}, log, observers=titler.observers())
    key = SessionKey("default", "clerk", "s1")
    try:
        await (await runtime.send("default", "clerk", "s1", "where is my parcel P-7?")).task
        await asyncio.wait_for(asked.wait(), 60)  # (a safety net: the title was asked for)
        assert (await runtime.session(key)).title is None  # (being written)
        waiting = asyncio.create_task(titled(titler))
        answer.set()  # the title model answers while the command ends: its title is kept
        await asyncio.wait_for(waiting, 60)
        assert (await runtime.session(key)).title == TITLE
    finally:
        await runtime.close()
        await log.close()
