"""Large tool results (docs/large-results.md) on SQLite and PostgreSQL: a 200,000-character
result is stored whole in the session's attachment table with the events naming it, the model
reads the exact preview, `read_result` returns exact ranges (gated: a deny rule stops it), a
reference foreign to the session is refused, and the blob survives a restart with its session."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, Rules, tool
from loopwright.builtins import read_result
from loopwright.messages import ToolResultMessage
from loopwright.runtime import Settings
from loopwright.runtime.journal import session_in_log
from loopwright.store.log import EventLog, SessionKey
from loopwright.store.opening import open_log

TEXT = "".join(f"line {i:06d}\n" for i in range(16_667))[:200_000]  # 12 characters a line
DATA = TEXT.encode()
SHA = hashlib.sha256(DATA).hexdigest()
REF = "result:" + SHA
KEY = SessionKey("acme", "reader", "s1")
PREVIEW = (
    f"[Tool 'dump' returned 200000 characters, over its limit of 50000: the whole result is "
    f"stored as {REF}. Below: its first 3000 and last 1000 characters. Read any range with "
    f"read_result(ref, offset, length).]\n{TEXT[:3000]}\n[… 196000 characters not shown …]\n"
    f"{TEXT[-1000:]}"
)


@tool
def dump() -> str:
    """Return a very long text."""
    return TEXT


@pytest.fixture(params=["sqlite", "postgres"])
async def where(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "loopwright.db")
    else:
        yield request.getfixturevalue("pg_url")


def stored_rows(where: str) -> list[tuple[Any, ...]]:
    """The attachment table's rows, read around the log (sha256, media type, size, bytes)."""
    query = "SELECT sha256, media_type, size, data FROM {}"
    if where.startswith("postgres"):
        import psycopg

        with psycopg.connect(where) as db:
            rows = db.execute(query.format("loopwright_attachments")).fetchall()
            return [(s, m, n, bytes(d)) for s, m, n, d in rows]
    with sqlite3.connect(where) as db:
        return db.execute(query.format("attachments")).fetchall()


def seen(model: Any, request: int) -> list[tuple[str, bool]]:
    """The tool results the model read in its `request`-th request (content, is_error)."""
    messages = model.requests[request].messages
    return [(m.content, m.is_error) for m in messages if isinstance(m, ToolResultMessage)]


def reads(*ranges: tuple[int, int], ref: str = REF) -> dict[str, Any]:
    calls = [
        call("read_result", f"r{i}", ref=ref, offset=o, length=n) for i, (o, n) in enumerate(ranges)
    ]
    return {"tool_calls": calls}


async def test_a_large_result_is_stored_whole_and_read_back_by_range(where: str):
    log: EventLog = await open_log(where)
    try:
        model = scripted(
            {"tool_calls": [call("dump")]},
            reads((0, 12), (99_996, 24), (199_990, 50), (250_000, 10)),
            "read",
        )
        agent = Agent(model=model, name="reader", tools=[dump, read_result])
        session = await session_in_log(log, agent, KEY, Settings())
        result = await drive(session.run("go"))
    finally:
        await log.close()
    assert result.stop_reason == "completed"
    assert seen(model, 1) == [(PREVIEW, False)]
    assert seen(model, 2)[1:] == [
        ("line 000000\n", False),
        ("line 008333\nline 008334\n", False),
        ("5\nline 016", False),  # (the range ends with the result)
        ("", False),  # past the end: nothing
    ]
    assert seen(model, 2)[0] == (PREVIEW, False)
    [output] = [e for e in result.events if e.type == "tool:output" and e.tool == "dump"]
    assert output.content == PREVIEW
    assert (output.stored.sha256, output.stored.size, output.stored.name) == (SHA, 200_000, REF)
    assert stored_rows(where) == [(SHA, "text/plain", 200_000, DATA)]


async def test_the_blob_survives_a_restart_with_its_session(where: str):
    log: EventLog = await open_log(where)
    try:
        agent = Agent(
            model=scripted({"tool_calls": [call("dump")]}, "ok"), name="reader", tools=[dump]
        )
        session = await session_in_log(log, agent, KEY, Settings())
        await drive(session.run("go"))
    finally:
        await log.close()
    log = await open_log(where)  # a new process, as far as the store knows
    try:
        model = scripted(reads((12, 12)), "read")
        agent = Agent(model=model, name="reader", tools=[dump, read_result])
        session = await session_in_log(log, agent, KEY, Settings())
        await drive(session.run("read it"))
    finally:
        await log.close()
    assert seen(model, 0) == [(PREVIEW, False)]  # (the history read back: the preview only)
    assert seen(model, 1)[1:] == [("line 000001\n", False)]


async def test_a_reference_foreign_to_the_session_is_refused(where: str):
    """The table is keyed by hash alone: a session reads only the references its history names."""
    log: EventLog = await open_log(where)
    try:
        first = Agent(
            model=scripted({"tool_calls": [call("dump")]}, "ok"), name="reader", tools=[dump]
        )
        await drive((await session_in_log(log, first, KEY, Settings())).run("go"))
        model = scripted(reads((0, 12)), "no")
        other = Agent(model=model, name="reader", tools=[read_result])
        key = SessionKey("acme", "reader", "s2")
        await drive((await session_in_log(log, other, key, Settings())).run("read theirs"))
    finally:
        await log.close()
    assert seen(model, 1) == [(f"no stored result {REF!r} in this session", True)]


async def test_a_deny_rule_on_read_result_stops_it(where: str):
    rules = Rules.from_yaml(
        "rules:\n  - {name: no-reading, tool: read_result, decision: deny}\n"
        "  - {name: dumps, tool: dump, decision: allow}\n"
    )
    log: EventLog = await open_log(where)
    try:
        model = scripted({"tool_calls": [call("dump")]}, reads((0, 12)), "denied")
        agent = Agent(
            model=model, name="reader", tools=[dump, read_result], rules=rules, on_deny="continue"
        )
        await drive((await session_in_log(log, agent, KEY, Settings())).run("go"))
    finally:
        await log.close()
    assert seen(model, 2)[1:] == [
        ("Tool call denied by policy. Reason: matched rule 'no-reading'", True)
    ]


async def test_in_memory_the_model_gets_the_preview_and_read_result_says_nothing_was_kept():
    model = scripted({"tool_calls": [call("dump")]}, reads((0, 12)), "ok")
    await run_agent(Agent(model=model, tools=[dump, read_result]))
    assert seen(model, 2) == [
        (PREVIEW, False),
        ("this session keeps no store: only the preview of a large result was kept", True),
    ]


async def test_a_result_within_its_limit_is_not_stored(tmp_path: Path):
    where = str(tmp_path / "loopwright.db")
    log: EventLog = await open_log(where)
    try:
        model = scripted({"tool_calls": [call("dump")]}, "ok")
        agent = Agent(model=model, name="reader", tools=[dump], max_tool_output=200_000)
        result = await drive((await session_in_log(log, agent, KEY, Settings())).run("go"))
    finally:
        await log.close()
    assert seen(model, 1) == [(TEXT, False)]
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert output.stored is None
    assert stored_rows(where) == []


def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]):
    doc = (Path(__file__).parents[1] / "docs" / "large-results.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/large-results.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out == "Found: 'match 05000\\nmatch 05001\\n'\n"


def test_agent_yaml_builtins_read_result_gives_the_tool(tmp_path: Path):
    from loopwright.project import load_project

    folder = tmp_path / "agents" / "reader"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text("model: scripted:script.yaml\nbuiltins: [read_result]\n")
    (folder / "script.yaml").write_text("replies:\n  - text: hi\n")
    assert [t.name for t in load_project(tmp_path).agent("reader").tools] == ["read_result"]
