"""Model-written session titles (`runtime.titling`, `[titles]`) on real SQLite and PostgreSQL
logs: a new session's first reply has a scripted title model write its title, stored once on
its row (a second run asks nothing more), which wins over the first message wherever titles
show; a fork copies it; a failing title model is logged and leaves the first message; without
`[titles]` nothing is asked; an old database (SQLite schema 6, PostgreSQL 5) migrates. Titles
written in the background are awaited with `Titler.settled`, never by sleeping."""

from __future__ import annotations

import logging
import sqlite3

import psycopg
import pytest

from fork_fixtures import *  # noqa: F403 (the fixture: backend)
from fork_fixtures import Backend
from loopwright import Agent
from loopwright.errors import ConfigError
from loopwright.messages import UserMessage
from loopwright.project.config import check
from loopwright.runtime.forking import fork
from loopwright.runtime.titles import TITLE_CHARS, titles
from loopwright.runtime.titling import DEFAULT_PROMPT, Titler, Titles
from loopwright.store.log import SessionKey
from loopwright.testing import ScriptedModel
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, pg_logs, runtimes)
from runtime_fixtures import ended, logged

KEY = SessionKey("acme", "clerk", "s1")
FIRST = "How heavy   is\nparcel P-7?"
RUN = [
    "session",
    "input:received",
    "step:started",
    "budget:check",
    "message:completed",
    "step:finished",
    "loop:done",
    "done",
]


def clerk() -> Agent:
    return Agent(
        name="clerk", model=ScriptedModel.from_script(["It weighs 2 kg.", "You're welcome."])
    )


def title_model(*replies: object) -> ScriptedModel:
    return ScriptedModel.from_script(list(replies), name="scripted:titles")


async def test_a_configured_model_titles_a_new_session_once(backend: Backend, runtimes) -> None:
    model = title_model({"text": '  "Weight of parcel P-7"\n'})
    log = await backend.log()
    titler = Titler(Titles(model), log)
    runtime = runtimes({"clerk": clerk()}, log, observers=titler.observers())
    first = await runtime.send("acme", "clerk", "s1", FIRST)
    assert [e.type for e in (await ended(first), *[])] == ["done"]
    await titler.settled()
    [request] = model.requests
    assert request.system == DEFAULT_PROMPT
    assert list(request.messages) == [
        UserMessage(content=f"Message:\n{FIRST}\n\nReply:\nIt weighs 2 kg.")
    ]
    record = await runtime.session(KEY)
    assert record.title == "Weight of parcel P-7"  # one line, without its quotes
    await ended(await runtime.send("acme", "clerk", "s1", "thanks"))  # not its first run
    await titler.settled()
    assert len(model.requests) == 1
    assert (await runtime.session(KEY)).title == "Weight of parcel P-7"
    assert await titles(runtime, [await runtime.session(KEY)]) == ["Weight of parcel P-7"]
    [row] = backend.rows(KEY)["sessions"]
    assert row[-1] == "Weight of parcel P-7"  # the row's last column: `title`
    forked = await fork(runtime, KEY, at=len(RUN))  # a fork keeps its source's title
    assert (await runtime.session(forked)).title == "Weight of parcel P-7"
    await ended(await runtime.send("acme", "clerk", forked.id, "and P-8?"))
    await titler.settled()
    assert len(model.requests) == 1  # (a fork's runs are never its first: nothing asked)


async def test_a_long_title_is_cut_and_a_stored_one_is_kept(backend: Backend, runtimes) -> None:
    model = title_model({"text": "word " * 40}, "never asked")
    log = await backend.log()
    titler = Titler(Titles(model, prompt="Name it."), log)
    runtime = runtimes({"clerk": clerk()}, log, observers=titler.observers())
    await ended(await runtime.send("acme", "clerk", "s1", FIRST))
    await titler.settled()
    title = (await runtime.session(KEY)).title
    assert title == ("word " * 16).strip() + "…" and len(title) <= TITLE_CHARS
    assert model.requests[0].system == "Name it."
    from loopwright.store.titles import save_title

    assert await save_title(log, KEY, "another") is False  # written once: the first stays
    assert (await runtime.session(KEY)).title == title


async def test_without_titles_the_first_message_titles_it(backend: Backend, runtimes) -> None:
    runtime = runtimes({"clerk": clerk()}, await backend.log())
    await ended(await runtime.send("acme", "clerk", "s1", FIRST))
    record = await runtime.session(KEY)
    assert record.title is None
    assert await titles(runtime, [record]) == ["How heavy is parcel P-7?"]
    assert Titles.from_project({}) is None
    assert Titles.from_project({"titles": {"prompt": "Name it."}}) is None  # no model: none


async def test_a_failing_title_model_is_logged_and_the_first_message_stays(
    backend: Backend, runtimes, caplog: pytest.LogCaptureFixture
) -> None:
    model = title_model({"fail": {"error": "rate limited", "retryable": True}})
    log = await backend.log()
    titler = Titler(Titles(model), log)
    runtime = runtimes({"clerk": clerk()}, log, observers=titler.observers())
    with caplog.at_level(logging.WARNING, "loopwright.runtime.titling"):
        run = await runtime.send("acme", "clerk", "s1", FIRST)
        done = await ended(run)
        await titler.settled()
    assert (done.text, done.stop_reason) == ("It weighs 2 kg.", "completed")  # the run: as ever
    assert await logged(runtime.log, KEY) == RUN  # (a title is not an event)
    [warned] = [r for r in caplog.records if r.name == "loopwright.runtime.titling"]
    assert warned.levelno == logging.WARNING
    assert warned.getMessage() == (
        "session s1 of agent clerk: no title from scripted:titles (rate limited); "
        "its first message titles it"
    )
    record = await runtime.session(KEY)
    assert record.title is None
    assert await titles(runtime, [record]) == ["How heavy is parcel P-7?"]


def test_titles_is_a_checked_table_of_loopwright_toml() -> None:
    text = '[titles]\nmodel = "openai:gpt-4o-mini"\nprompt = "Name it."\n'
    check({"titles": {"model": "openai:gpt-4o-mini", "prompt": "Name it."}}, text, "lw.toml")
    with pytest.raises(
        ConfigError, match=r"\[titles\] unknown key 'modle' \(did you mean 'model'\?\)"
    ):
        check({"titles": {"modle": "x"}}, '[titles]\nmodle = "x"\n', "lw.toml")
    assert Titles.from_project({"titles": {"model": "openai:gpt-4o-mini"}}) == Titles(
        "openai:gpt-4o-mini", DEFAULT_PROMPT
    )


async def test_an_old_database_gains_the_title_column(backend: Backend, runtimes) -> None:
    """A log written before titles (its row without the column, its version one lower) opens
    migrated: its session reads untitled, then takes a title."""
    log = await backend.log()
    runtime = runtimes({"clerk": clerk()}, log)
    await ended(await runtime.send("acme", "clerk", "s1", FIRST))
    await runtime.close()
    await log.close()
    if backend.name == "sqlite":
        with sqlite3.connect(backend.url) as db:
            db.execute("ALTER TABLE sessions DROP COLUMN title")
            db.execute("PRAGMA user_version=6")
    else:
        with psycopg.connect(backend.url, autocommit=True) as pg:
            pg.execute("ALTER TABLE loopwright_sessions DROP COLUMN title")
            pg.execute("UPDATE loopwright_schema SET version = 5")
    model = title_model({"text": "Parcel weight"})
    reopened = await backend.log()
    titler = Titler(Titles(model), reopened)
    runtime = runtimes({"clerk": clerk()}, reopened, observers=titler.observers())
    assert (await runtime.session(KEY)).title is None
    assert await titles(runtime, [await runtime.session(KEY)]) == ["How heavy is parcel P-7?"]
    new = SessionKey("acme", "clerk", "s2")
    await ended(await runtime.send("acme", "clerk", "s2", "Where is P-9?"))
    await titler.settled()
    assert (await runtime.session(new)).title == "Parcel weight"
    if backend.name == "sqlite":
        with sqlite3.connect(backend.url) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (7,)
    else:
        with psycopg.connect(backend.url, autocommit=True) as pg:
            assert pg.execute("SELECT version FROM loopwright_schema").fetchall() == [(6,)]
