"""Idempotency keys (`ToolContext.idempotency_key`, `tool:started.idempotencyKey`; loop/keys.py):
one per call the model makes — two calls of one tool with the same arguments in a reply, or a
provider's call id used again in a later reply, get two — and the same on every attempt of a call:
a call that runs again after its question was answered, in another process (a fresh `Runtime` on
the same SQLite file or PostgreSQL schema), and through a snapshot of the session's state. The
crash recovery and the takeover are test_idempotency_ledger.py's (the crash model checker)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Answer, NeedsAnswer, Session, ToolContext, tool
from loopwright import events as ev
from loopwright.loop.keys import idempotency_key, session_part
from loopwright.mcp import MCPServer, StdioServer
from loopwright.mcp.server import IDEMPOTENCY_KEY
from loopwright.state.replay import fold
from loopwright.state.snapshots import from_snapshot, to_snapshot
from loopwright.store.log import SessionKey
from loopwright.wire import to_dict
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, pg_logs, runtimes)
from runtime_fixtures import ended

HERE = Path(__file__).parent


def booking(seen: list[tuple[str, str]]) -> Any:
    @tool
    async def book(amount: int, ctx: ToolContext) -> str:
        """Book a payment."""
        seen.append((ctx.call_id, ctx.idempotency_key))
        return f"booked {amount}"

    return book


def keys_started(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.id, e.idempotency_key) for e in events if isinstance(e, ev.ToolStarted)]


async def test_every_call_gets_its_own_key_even_with_the_same_tool_args_and_call_id():
    seen: list[tuple[str, str]] = []
    twice = {"tool_calls": [call("book", "c1", amount=5), call("book", "c2", amount=5)]}
    agent = Agent(name="payer", model=scripted(twice, twice, "done"), tools=[booking(seen)])
    session = Session(agent)
    result = await drive(session.run("pay twice, twice"))
    part = session_part(session.tenant, "payer", session.id)
    expected = [
        ("c1", f"{part}-1-0"),
        ("c2", f"{part}-1-1"),
        ("c1", f"{part}-2-0"),  # (the provider's ids again, in the next reply)
        ("c2", f"{part}-2-1"),
    ]
    assert seen == expected
    assert keys_started(result.events) == expected
    assert len({key for _, key in seen}) == 4 and len(part) == 32


async def test_the_key_is_in_tool_started_but_not_in_its_v1_form():
    seen: list[tuple[str, str]] = []
    model = scripted({"tool_calls": [call("book", "c1", amount=1)]}, "done")
    result = await drive(Session(Agent(name="a", model=model, tools=[booking(seen)])).run("go"))
    [started] = [e for e in result.events if isinstance(e, ev.ToolStarted)]
    assert to_dict(started)["idempotencyKey"] == seen[0][1]  # type: ignore[index]
    assert to_dict(started, "v1") == {
        "type": "tool:started",
        "id": "c1",
        "tool": "book",
        "args": {"amount": 1},
        "detailText": "no rules: allowed",
    }
    assert ev.ToolStarted(id="c1", tool="t", args={}, detail_text="").idempotency_key is None


async def test_the_count_of_replies_survives_a_snapshot_and_an_older_one_is_refused():
    seen: list[tuple[str, str]] = []
    once = {"tool_calls": [call("book", "c1", amount=5)]}
    agent = Agent(name="payer", model=scripted(once, "ok", once, "done"), tools=[booking(seen)])
    session = Session(agent)
    events = (await drive(session.run("first"))).events
    state = fold(events, agent._by_name)
    assert state.replies == session.state.replies == 2
    restored = from_snapshot(to_snapshot(state), agent._by_name)
    assert restored.replies == 2
    more = (await drive(session.run("second"))).events
    assert fold(more, agent._by_name, restored).replies == session.state.replies == 4
    assert [key.rsplit("-", 2)[1:] for _, key in seen] == [["1", "0"], ["3", "0"]]
    older = to_snapshot(state).replace(',"replies":2', "")
    with pytest.raises(ValueError, match="not a version 1 session snapshot"):
        from_snapshot(older, agent._by_name)  # (ignored: the whole log is folded instead)


# ---- across processes: a call run again when its question is answered ------------------------


def asking(seen: list[tuple[str, str]]) -> Agent:
    @tool
    async def charge(amount: int, ctx: ToolContext) -> str | NeedsAnswer:
        """Charge a card, once the person said which."""
        seen.append((ctx.call_id, ctx.idempotency_key))
        if "Which card?" not in ctx.answers:
            return NeedsAnswer("Which card?", ["visa", "amex"])
        return f"charged {amount} to {ctx.answers['Which card?']}"

    replies = ({"tool_calls": [call("charge", "c1", amount=7)]}, "charged")
    return Agent(name="payer", model=scripted(*replies), tools=[charge])


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("logs" if request.param == "sqlite" else "pg_logs")


async def test_a_call_run_again_in_another_process_keeps_its_key(backend, runtimes):
    seen: list[tuple[str, str]] = []
    first = runtimes({"payer": asking(seen)}, await backend())
    done = await ended(await first.send("acme", "payer", "s1", "charge me"))
    assert done.stop_reason == "paused"
    second = runtimes({"payer": asking(seen)}, await backend())  # another process
    [item] = await second.pending("acme")
    resolved = await second.resolve("acme", item.id, Answer(text="amex"))
    assert resolved.run is not None
    assert (await ended(resolved.run)).stop_reason == "completed"
    key = idempotency_key(session_part("acme", "payer", "s1"), 1, 0)
    assert seen == [("c1", key), ("c1", key)]
    stored = await second.log.read(SessionKey("acme", "payer", "s1"))
    assert keys_started([s.event for s in stored]) == [("c1", key), ("c1", key)]


# ---- MCP: the key in the call's `_meta` -------------------------------------------------------


async def test_an_mcp_server_receives_the_key_in_the_calls_meta(started):
    config = StdioServer(
        name="bank", command=sys.executable, args=(str(HERE / "mcp_idempotency_server.py"),)
    )
    started.append(server := MCPServer(config))
    replies = ({"tool_calls": [call("mcp__bank__meta_key", "c1")]}, "done")
    agent = Agent(name="payer", model=scripted(*replies), tools=[server])
    session = Session(agent)
    result = await drive(session.run("what key?"))
    [(_, key)] = keys_started(result.events)
    assert key == idempotency_key(session_part(session.tenant, "payer", session.id), 1, 0)
    [output] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert output.content == f"{IDEMPOTENCY_KEY}={key}"
