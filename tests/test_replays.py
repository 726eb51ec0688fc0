"""Replaying a stored session as a test (`loopwright.replays`, `loopwright replay`): sessions run
through a real `Runtime` on SQLite and on PostgreSQL (LOOPWRIGHT_REQUIRE_POSTGRES=1), replayed
unchanged (ok, nothing written) and against a changed tool, rule and prompt (the exact report);
the recorded decisions, answers and steering handed back where they were; the CLI's output and
exit statuses."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import call, scripted
from loopwright import Agent, Answer, Approval, Rules, Session, tool
from loopwright.cli.main import main
from loopwright.models.scripted import FunctionModel, Reply
from loopwright.project import load_project
from loopwright.replays import Change, RecordingError, read_recording, replay, replay_session
from loopwright.replays.replay import UNRECORDED
from loopwright.runtime import Runtime
from loopwright.runtime.replaying import replay_stored
from loopwright.store.export import export_jsonl
from loopwright.store.log import SessionKey, Store
from loopwright.store.opening import open_log
from loopwright.tools import ask_user
from runtime_fixtures import logs, pg_logs, runtimes  # noqa: F401 (the fixtures)

ROOT = Path(__file__).resolve().parents[1]
KEY = SessionKey("default", "shop", "s1")
RULES = """\
default_decision: deny
rules:
  - {name: look-freely, tool: lookup, decision: allow}
  - {name: refunds-ask, tool: refund, decision: ask}
"""
REPLIES = [
    {"text": "Looking.", "tool_calls": [call("lookup", "c1", order="A1")]},
    {"tool_calls": [call("refund", "c2", order="A1", amount=5)]},
    "Refunded 5.00 on A1.",
    "You're welcome.",
]
DELIVERED = {"content": "A1: delivered", "is_error": False}


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: delivered"


@tool(name="lookup")
def lookup_lost(order: str) -> str:
    """Look an order up (today's version: it says the order is lost)."""
    return f"{order}: lost"


@tool
def refund(order: str, amount: float) -> str:
    """Refund part of an order."""
    return f"refunded {amount:.2f} on {order}"


def shop(rules: str = RULES, **changes: Any) -> Agent:
    given: dict[str, Any] = {"tools": [lookup, refund]} | changes
    return Agent(name="shop", model=scripted(*REPLIES), rules=Rules.from_yaml(rules), **given)


MakeLog = Callable[..., Awaitable[Store]]


@pytest.fixture(params=["sqlite", "postgres"])
def make_log(request: pytest.FixtureRequest) -> MakeLog:
    """A log on the test's SQLite file, or on its PostgreSQL schema."""
    fixture: MakeLog = request.getfixturevalue("logs" if request.param == "sqlite" else "pg_logs")
    return fixture


async def record(runtime: Runtime) -> None:
    """Session s1: a refund that pauses for approval, approved by ana, then a second turn."""
    first = await runtime.send("default", "shop", "s1", "My order A1 arrived broken")
    assert (await first.wait()).stop_reason == "paused"
    [item] = await runtime.pending("default")
    resolved = await runtime.resolve("default", item.id, Approval.approve(by="ana"))
    assert resolved.run is not None
    assert (await resolved.run.wait()).stop_reason == "completed"
    second = await runtime.send("default", "shop", "s1", "Thanks!")
    assert (await second.wait()).text == "You're welcome."


async def test_a_stored_session_replays_unchanged_and_nothing_is_written(
    make_log: MakeLog,
    runtimes: Callable[..., Runtime],  # noqa: F811
) -> None:
    runtime = runtimes({"shop": shop()}, await make_log())
    await record(runtime)
    before = await runtime.session(KEY)
    report = await replay_stored(runtime, KEY)
    assert report.to_json() == {
        "ok": True,
        "session": "s1",
        "agent": "shop",
        "model": "recorded",
        "turns": 2,
        "calls": 2,
        "changes": [],
    }
    assert report.render() == (
        "replay of session s1 (agent shop, model recorded): no changes in 2 turn(s), 2 call(s)"
    )
    assert (await runtime.session(KEY)).last_seq == before.last_seq
    assert [r.key for r in (await runtime.sessions("default", None)).items] == [KEY]


async def test_a_changed_tool_result_and_rules_are_reported_exactly(
    make_log: MakeLog,
    runtimes: Callable[..., Runtime],  # noqa: F811
) -> None:
    runtime = runtimes({"shop": shop()}, await make_log())
    await record(runtime)

    lost = await replay_stored(runtime, KEY, agent=shop(tools=[lookup_lost, refund]))
    assert lost.changes == (
        Change(1, "result", DELIVERED, {"content": "A1: lost", "is_error": False}, 1, "lookup"),
    )
    allowed = await replay_stored(runtime, KEY, agent=shop(RULES.replace("ask}", "allow}")))
    assert allowed.changes == (
        Change(1, "decision", "ask", "allow", 2, "refund"),
        Change(1, "approval", "approved", None, 2, "refund"),
    )
    asking = RULES.replace(
        "look-freely, tool: lookup, decision: allow", "look, tool: lookup, decision: ask"
    )
    denied = await replay_stored(runtime, KEY, agent=shop(asking))
    refused = f"Tool call denied by user. Reason: matched rule 'look' — human denied: {UNRECORDED}"
    assert denied.changes == (
        Change(1, "decision", "allow", "ask", 1, "lookup"),
        Change(1, "approval", None, "unrecorded", 1, "lookup"),
        Change(1, "result", DELIVERED, {"content": refused, "is_error": True}, 1, "lookup"),
        Change(
            1, "call", {"tool": "refund", "args": {"order": "A1", "amount": 5}}, None, 2, "refund"
        ),
        Change(
            1,
            "answer",
            "Refunded 5.00 on A1.",
            "Stopped: denied lookup. Send another message to continue.",
        ),
        Change(1, "stop_reason", "completed", "denied"),
    )
    assert not denied.ok
    assert denied.render().splitlines() == [
        "replay of session s1 (agent shop, model recorded): 6 changes",
        'turn 1 · "My order A1 arrived broken"',
        "  call 1 lookup · decision: allow → ask",
        "  call 1 lookup · approval: (none) → unrecorded",
        f"  call 1 lookup · result: A1: delivered → error {refused[:99]}…",
        '  call 2 refund · call: refund {"amount": 5, "order": "A1"} → (not made)',
        '  run · answer: "Refunded 5.00 on A1." → '
        '"Stopped: denied lookup. Send another message to continue."',
        "  run · stop reason: completed → denied",
    ]
    assert denied.to_json()["changes"][1] == {
        "turn": 1,
        "call": 1,
        "tool": "lookup",
        "kind": "approval",
        "recorded": None,
        "replayed": "unrecorded",
    }


def greet(request: Any) -> str:
    """A live model's stand-in whose answer depends on the prompt."""
    return f"Hello from {request.system}."


async def test_a_changed_prompt_shows_with_a_live_model(
    make_log: MakeLog,
    runtimes: Callable[..., Runtime],  # noqa: F811
) -> None:
    """The recorded replies do not depend on the prompt (offline, a changed prompt replays
    unchanged); a live model's answer does, and the report says so."""
    agent = Agent(name="shop", model=FunctionModel(greet), instructions="the shop")
    runtime = runtimes({"shop": agent}, await make_log())
    assert (await (await runtime.send("default", "shop", "s1", "hi")).wait()).stop_reason == (
        "completed"
    )
    bakery = dataclasses.replace(agent, instructions="the bakery")
    assert (await replay_stored(runtime, KEY, agent=bakery)).ok
    live = FunctionModel(greet, name="function:greet")
    assert (await replay_stored(runtime, KEY, agent=agent, model=live)).ok
    changed = await replay_stored(runtime, KEY, agent=bakery, model=live)
    assert (changed.model, changed.changes) == (
        "function:greet",
        (Change(1, "answer", "Hello from the shop.", "Hello from the bakery."),),
    )


async def test_recorded_edits_denials_and_answers_are_handed_back_by_tool_and_position() -> None:
    """The second refund was approved with edited arguments, the first denied (the run went
    on), and the agent's question answered: a replay that did not hand them back would refund
    other amounts, or pause."""
    replies = [
        {"tool_calls": [call("refund", "r1", order="A1", amount=9)]},
        {"tool_calls": [call("ask_user", "q1", question="Which order?")]},
        {"tool_calls": [call("refund", "r2", order="A2", amount=7)]},
        "Done.",
    ]
    agent = Agent(
        name="shop",
        model=scripted(*replies),
        tools=[lookup, refund, ask_user],
        rules=Rules.from_yaml(RULES + "  - {name: questions, tool: ask_user, decision: allow}\n"),
        on_deny="continue",
    )
    said = iter(
        [
            Approval.deny("too much", by="ana"),
            Approval.approve({"order": "A2", "amount": 3}, by="ana"),
        ]
    )

    def human(request: Any) -> Any:
        return Answer(text="A2", by="ana") if request.call.name == "ask_user" else next(said)

    events = [e async for e in Session(agent).run("refunds please", approver=human)]
    outputs = [e.content for e in events if e.type == "tool:output"]
    assert outputs == [
        "Tool call denied by user. Reason: matched rule 'refunds-ask' — human denied: too much",
        "A2",
        "refunded 3.00 on A2",
    ]
    assert (await replay_session(agent, events)).ok
    trusting = RULES.replace("ask}", "allow}") + "  - {name: q, tool: ask_user, decision: allow}\n"
    report = await replay_session(
        dataclasses.replace(agent, rules=Rules.from_yaml(trusting)), events
    )
    denial = {"content": outputs[0], "is_error": True}
    assert report.changes == (
        Change(1, "decision", "ask", "allow", 1, "refund"),
        Change(1, "approval", "denied", None, 1, "refund"),
        Change(
            1, "result", denial, {"content": "refunded 9.00 on A1", "is_error": False}, 1, "refund"
        ),
        Change(1, "decision", "ask", "allow", 3, "refund"),
        Change(1, "approval", "edited", None, 3, "refund"),
        Change(
            1,
            "result",
            {"content": "refunded 3.00 on A2", "is_error": False},
            {"content": "refunded 7.00 on A2", "is_error": False},
            3,
            "refund",
        ),
    )


async def test_steering_enters_where_it_entered() -> None:
    """A steering message sent during the first step entered after it; the replay queues it
    after as many replies, so a live model that reads it sees it in the same place."""
    session: Session

    def steered(request: Any) -> Any:
        if len(request.messages) == 1:
            session.steer("also check A2")
        return reader(request)

    agent = Agent(name="shop", model=FunctionModel(steered), tools=[lookup])
    session = Session(agent)
    events = [e async for e in session.run("where is A1?")]
    assert [e.type for e in events if e.type in ("step:finished", "steering:injected")] == [
        "step:finished",
        "steering:injected",
        "step:finished",
    ]
    assert events[-1].text == "last said: also check A2"
    assert (await replay_session(agent, events)).ok
    assert (await replay_session(agent, events, model=FunctionModel(reader))).ok


async def test_a_follow_up_enters_where_it_entered() -> None:
    session: Session

    def followed(request: Any) -> Any:
        if len(request.messages) == 1:
            session.follow_up("one more thing")
            return "first answer"
        return f"then: {request.messages[-1].content}"

    agent = Agent(name="shop", model=FunctionModel(followed))
    session = Session(agent)
    events = [e async for e in session.run("hello")]
    injected = [e for e in events if e.type == "steering:injected"]
    assert [(e.mode, e.message.content) for e in injected] == [("follow_up", "one more thing")]
    assert events[-1].text == "then: one more thing"
    assert (await replay_session(agent, events)).ok
    live = FunctionModel(
        lambda r: "first answer" if len(r.messages) == 1 else f"then: {r.messages[-1].content}"
    )
    assert (await replay_session(agent, events, model=live)).ok


def reader(request: Any) -> Any:
    """A live model that looks A1 up, then says what the last message said."""
    if len(request.messages) == 1:
        return Reply.parse({"tool_calls": [call("lookup", "c1", order="A1")]})
    last = request.messages[-1]
    return f"last said: {last.content if last.role == 'user' else 'a tool'}"


def test_a_bad_recording_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(RecordingError, match="is not an exported session"):
        read_recording(bad)
    with pytest.raises(RecordingError, match="cannot read"):
        read_recording(tmp_path / "missing.jsonl")
    with pytest.raises(RecordingError, match="nothing to replay"):
        replay(shop(), [])


# ---- the CLI ----------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def project(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A copy of the examples project, its store on SQLite or on PostgreSQL, holding the
    support agent's refund session `s1` (approved by ana) and its export `s1.jsonl`."""
    if request.param == "postgres":
        monkeypatch.setenv("LOOPWRIGHT_STORE_URL", request.getfixturevalue("pg_url"))
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    root = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", root, ignore=shutil.ignore_patterns(".loopwright"))

    async def run() -> None:
        log = await open_log(load_project(root).store_url())
        runtime = Runtime(load_project(root).agents, log)
        try:
            support = SessionKey("default", "support", "s1")
            first = await runtime.send("default", "support", "s1", "My mug arrived broken")
            await first.wait()
            [item] = await runtime.pending("default")
            resolved = await runtime.resolve("default", item.id, Approval.approve(by="ana"))
            assert resolved.run is not None
            await resolved.run.wait()
            with (root / "s1.jsonl").open("w") as out:
                await export_jsonl(log, support, out)
        finally:
            await runtime.close()
            await log.close()

    asyncio.run(run())
    return root


def cli(*args: str) -> int:
    return main(list(args))


def test_the_cli_replays_a_stored_session_and_a_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project)]
    assert cli("replay", "s1", *where) == 0
    unchanged = (
        "replay of session s1 (agent support, model recorded): no changes in 1 turn(s), 2 call(s)\n"
    )
    assert capsys.readouterr() == (unchanged, "")
    assert cli("replay", str(project / "s1.jsonl"), "--agent", "support", *where, "--json") == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "session": "s1",
        "agent": "support",
        "model": "recorded",
        "turns": 1,
        "calls": 2,
        "changes": [],
    }
    rules = project / "agents" / "support" / "rules.yaml"
    rules.write_text(rules.read_text().replace("decision: ask", "decision: allow"))
    assert cli("replay", "s1", *where) == 1
    assert capsys.readouterr().out.splitlines() == [
        "replay of session s1 (agent support, model recorded): 2 changes",
        'turn 1 · "My mug arrived broken"',
        "  call 2 issue_refund · decision: ask → allow",
        "  call 2 issue_refund · approval: approved → (none)",
    ]


def test_the_cli_refuses_bad_input_with_the_usage_status(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project)]
    assert cli("replay", "nope", *where) == 2
    assert capsys.readouterr().err.splitlines()[0] == "loopwright: error: no session 'nope'"
    assert cli("replay", str(project / "s1.jsonl"), *where) == 2
    assert capsys.readouterr().err.splitlines() == [
        "loopwright: error: which agent should the session be replayed against? (agents: "
        "concierge, payments, support, writer)",
        "hint: say which with --agent NAME",
    ]
    (project / "bad.jsonl").write_text('{"seq": 1}\n')
    assert cli("replay", str(project / "bad.jsonl"), "--agent", "support", *where) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("loopwright: error: ") and "is not an exported session" in err[0]
    assert err[1] == "hint: export one with `loopwright sessions export ID --out FILE`"
    assert cli("replay", "s1", "--model", "nosuch:model", *where) == 2
    assert capsys.readouterr().err.startswith("loopwright: error: unknown model 'nosuch:model'")
