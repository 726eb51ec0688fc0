"""Pending items across processes: a run pauses in one process that then exits, and another
process decides (approve, approve with an edit, deny with a sibling outstanding) and finishes
the run. Two processes racing for one session: exactly one proceeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from loopwright import events as ev
from loopwright.store import open_store
from test_crash import WORKER, check_log, ledger, work


def out(process: subprocess.CompletedProcess[str]) -> dict:
    assert process.returncode == 0, process.stderr[-2000:]
    return json.loads(process.stdout)


def pending(tmp: Path) -> list:
    store = open_store(tmp / "db.sqlite")
    items = store.pending("default", session_id="s")
    store.close()
    return items


def events_of_last_run(tmp: Path) -> list[ev.Event]:
    store = open_store(tmp / "db.sqlite")
    stored = [e.event for e in store.load("s", "default")]
    store.close()
    start = max(i for i, e in enumerate(stored) if e.type == "session")
    return stored[start:]


def pause(tmp: Path) -> tuple[str, str]:
    paused = out(work(tmp, "run", "refund 1"))
    assert paused["stop"] == "paused" and len(paused["pending"]) == 2
    assert ledger(tmp) == {"fetch fetch-r1": 1}  # the allowed sibling ran before the pause
    first, second = pending(tmp)
    assert (first.call_id, second.call_id) == ("refund-1-a", "refund-1-b")
    return first.id, second.id


def test_approved_in_another_process_the_run_completes(tmp_path):
    first, second = pause(tmp_path)
    assert out(work(tmp_path, "resolve", first, "approve")) == {
        "status": "resolved",
        "outstanding": 1,
    }
    assert out(work(tmp_path, "resolve", second, "approve")) == {
        "status": "resolved",
        "outstanding": 0,
    }
    assert out(work(tmp_path, "resolve", second, "deny"))["status"] == "already_resolved"
    done = out(work(tmp_path, "resume"))
    assert (done["stop"], done["text"]) == ("completed", "done")
    assert ledger(tmp_path) == {"fetch fetch-r1": 1, "refund refund-1-a": 1, "refund refund-1-b": 1}
    resumed = [e.type for e in events_of_last_run(tmp_path)]
    assert resumed[:5] == [
        "session",
        "approval:resolved",
        "actauth:decision",
        "approval:resolved",
        "actauth:decision",
    ]
    check_log(tmp_path)


def test_approved_with_an_edit_in_another_process(tmp_path):
    first, second = pause(tmp_path)
    refused = out(work(tmp_path, "resolve", first, "approve", '{"n": "ten"}'))
    assert refused == {"status": "invalid", "outstanding": 2}
    out(work(tmp_path, "resolve", first, "approve", '{"n": 10}'))
    out(work(tmp_path, "resolve", second, "approve"))
    assert out(work(tmp_path, "resume"))["stop"] == "completed"
    results = [e for e in events_of_last_run(tmp_path) if e.type == "tool:output"]
    assert sorted((e.id, e.content) for e in results) == [  # threads: in either order
        ("refund-1-a", "refunded 10"),
        ("refund-1-b", "refunded 1"),
    ]
    check_log(tmp_path)


def test_denied_with_a_sibling_outstanding_in_another_process(tmp_path):
    first, second = pause(tmp_path)
    assert out(work(tmp_path, "resolve", first, "deny")) == {"status": "resolved", "outstanding": 0}
    assert out(work(tmp_path, "resolve", second, "approve"))["status"] == "already_resolved"
    assert out(work(tmp_path, "resume"))["stop"] == "denied"
    assert ledger(tmp_path) == {"fetch fetch-r1": 1}
    statuses = [
        (e.id, e.status_text) for e in events_of_last_run(tmp_path) if e.type == "tool:result"
    ]
    assert statuses == [("refund-1-a", "Denied."), ("refund-1-b", "Skipped.")]
    check_log(tmp_path)


def test_two_processes_racing_for_one_session_exactly_one_proceeds(tmp_path):
    """Both start at once. The one that claims the session keeps it (its model prints "holding"
    and waits for a line) until the other has tried and been refused; then it is let go."""
    env = {**os.environ, "LEDGER": str(tmp_path / "ledger.txt")}
    out(work(tmp_path, "run", "warm up"))  # the session and its schema exist
    argv = [sys.executable, str(WORKER), str(tmp_path / "db.sqlite"), "s", "run"]
    racers = [
        subprocess.Popen(
            [*argv, f"slow {i}"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    watchdog = threading.Timer(120, lambda: [r.kill() for r in racers])  # a safety net
    watchdog.start()
    try:
        firsts = [r.stdout.readline() for r in racers]  # type: ignore[union-attr]
        [holder] = [r for r, line in zip(racers, firsts, strict=True) if line == "holding\n"]
        rests = [r.communicate("go\n" if r is holder else None)[0] for r in racers]
    finally:
        watchdog.cancel()
        for racer in racers:  # (none is left running when the test fails)
            if racer.poll() is None:
                racer.kill()
            racer.communicate()
    last_lines = [json.loads((a + b).splitlines()[-1]) for a, b in zip(firsts, rests, strict=True)]
    assert sorted(line["stop"] for line in last_lines) == ["busy", "completed"]
    assert [line["text"] for line in last_lines if "text" in line] == ["released"]
    check_log(tmp_path)


def test_a_question_answered_in_another_process(tmp_path):
    paused = out(work(tmp_path, "run", "ask 3"))
    assert paused["stop"] == "paused" and ledger(tmp_path) == {"fetch fetch-a3": 1}
    [question] = pending(tmp_path)
    assert (question.kind, question.call_id, question.args) == (
        "question",
        "ask-3",
        {"question": "Which card?", "options": ["visa", "amex"]},
    )
    wrong = out(work(tmp_path, "resolve", question.id, "approve"))
    assert wrong == {"status": "invalid", "outstanding": 1}
    assert out(work(tmp_path, "answer", question.id, "amex")) == {
        "status": "resolved",
        "outstanding": 0,
    }
    assert out(work(tmp_path, "resume"))["stop"] == "completed"
    outputs = [(e.id, e.content) for e in events_of_last_run(tmp_path) if e.type == "tool:output"]
    assert outputs == [("ask-3", "amex")]
    check_log(tmp_path)


STEERED_WORKER = """
import asyncio, os, sys
from loopwright import Agent
from loopwright.store import open_store
from loopwright.store.durable import open_session
from loopwright.testing import ScriptedModel

async def main():
    store = open_store(sys.argv[1])
    agent = Agent(model=ScriptedModel.from_script([{"stall": 3600}]))
    session = await open_session(agent, store, "s")
    async for event in session.run("first"):
        if event.type == "budget:check":  # the request is in flight: steer, then die
            session.steer("mind the budget")
            session.follow_up("and say goodbye")
            os._exit(9)

asyncio.run(main())
"""


async def test_a_message_sent_to_a_run_survives_its_crash(tmp_path):
    """P1 for steering: a steer and a follow-up sent to a running run are in the log at once;
    the process dies before delivering them; the next run, in another process, delivers them."""
    from conftest import drive
    from loopwright import Agent
    from loopwright.store.durable import open_session
    from loopwright.testing import FunctionModel, Reply

    db = tmp_path / "db.sqlite"
    died = subprocess.run([sys.executable, "-c", STEERED_WORKER, str(db)], capture_output=True)
    assert died.returncode == 9, died.stderr.decode()[-2000:]
    store = open_store(db)
    logged = [e.event for e in store.load("s", "default")]
    assert [(e.mode, e.text) for e in logged if isinstance(e, ev.SteeringQueued)] == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]

    def heard(request):
        return Reply(text=" | ".join(m.content for m in request.messages if m.role == "user"))

    session = await open_session(Agent(model=FunctionModel(heard)), store, "s")
    assert session.history.queued == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]
    result = await drive(session.run("second"))
    injected = [(e.mode, e.message.content) for e in result.events if e.type == "steering:injected"]
    assert injected == [("steer", "mind the budget"), ("follow_up", "and say goodbye")]
    assert result.text == "first | second | mind the budget | and say goodbye"
    again = await open_session(Agent(model=FunctionModel(heard)), store, "s")
    assert again.history.queued == []  # delivered: nothing is sent twice
    store.close()


async def test_a_cancel_drops_what_was_queued_in_the_log_too(tmp_path):
    from conftest import verify
    from loopwright import Agent
    from loopwright.store.durable import open_session
    from loopwright.testing import ScriptedModel

    store = open_store(tmp_path / "db.sqlite")
    session = await open_session(
        Agent(model=ScriptedModel.from_script([{"stall": 3600}])), store, "s"
    )
    events = []
    async with session.run("first") as run:
        async for event in run:
            events.append(event)
            if event.type == "budget:check":
                session.steer("never delivered")
                run.cancel()
    verify(events)
    assert events[-2].type == "loop:aborted"
    logged = [e.event.type for e in store.load("s", "default")]
    assert "steering:queued" in logged and "steering:injected" not in logged
    reopened = await open_session(Agent(model=ScriptedModel.from_script(["ok"])), store, "s")
    assert reopened.history.queued == []
    store.close()
