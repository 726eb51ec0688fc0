"""Pending items across processes: a run pauses in one process that then exits, and another
process decides (approve, approve with an edit, deny with a sibling outstanding); the decision
on the last open item resumes the run in the process that made it, which finishes it. Two
processes racing for one session: exactly one proceeds."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from loopwright import events as ev
from loopwright.runtime.journal import LEASE_ENV
from loopwright.store import PendingRecord, open_log
from test_crash import KEY, SHORT_LEASE, WORKER, check_log, ledger, read_log, work


def out(process: subprocess.CompletedProcess[str]) -> dict:
    assert process.returncode == 0, process.stderr[-2000:]
    return json.loads(process.stdout)


def pending(tmp: Path) -> list[PendingRecord]:
    async def read() -> list[PendingRecord]:
        log = await open_log(tmp / "db.sqlite")
        try:
            return list((await log.pending("default", session=KEY)).items)
        finally:
            await log.close()

    return asyncio.run(read())


def events_of_last_run(tmp: Path) -> list[ev.Event]:
    stored = [e.event for e in read_log(tmp)[0]]
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
        "status": "waiting",
        "outstanding": 1,
    }
    assert out(work(tmp_path, "resolve", second, "approve")) == {
        "status": "resumed",
        "outstanding": 0,
        "stop": "completed",
        "text": "done",
    }
    assert out(work(tmp_path, "resolve", second, "deny")) == {
        "status": "already_resolved",
        "outstanding": 0,
    }
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
    assert out(work(tmp_path, "resolve", first, "approve", '{"n": 10}'))["status"] == "waiting"
    assert out(work(tmp_path, "resolve", second, "approve"))["stop"] == "completed"
    results = [e for e in events_of_last_run(tmp_path) if e.type == "tool:output"]
    assert sorted((e.id, e.content) for e in results) == [  # threads: in either order
        ("refund-1-a", "refunded 10"),
        ("refund-1-b", "refunded 1"),
    ]
    check_log(tmp_path)


def test_denied_with_a_sibling_outstanding_in_another_process(tmp_path):
    first, second = pause(tmp_path)
    denied = out(work(tmp_path, "resolve", first, "deny"))
    assert (denied["status"], denied["outstanding"], denied["stop"]) == ("resumed", 0, "denied")
    assert out(work(tmp_path, "resolve", second, "approve"))["status"] == "already_resolved"
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
    answered = out(work(tmp_path, "answer", question.id, "amex"))
    assert (answered["status"], answered["outstanding"], answered["stop"]) == (
        "resumed",
        0,
        "completed",
    )
    outputs = [(e.id, e.content) for e in events_of_last_run(tmp_path) if e.type == "tool:output"]
    assert outputs == [("ask-3", "amex")]
    check_log(tmp_path)


STEERED_WORKER = """
import asyncio, os, sys
from loopwright import Agent
from loopwright.runtime import open_session
from loopwright.store import open_log
from loopwright.testing import ScriptedModel

async def main():
    log = await open_log(sys.argv[1])
    agent = Agent(model=ScriptedModel.from_script([{"stall": 3600}]))
    session = await open_session(agent, log, "s")
    async for event in session.run("first"):
        if event.type == "budget:check":  # the request is in flight: steer, then die
            session.steer("mind the budget")
            session.follow_up("and say goodbye")
            await session.journal.flushed()  # logged (by a task of the journal's)
            os._exit(9)

asyncio.run(main())
"""


async def test_a_message_sent_to_a_run_survives_its_crash(tmp_path):
    """P1 for steering: a steer and a follow-up sent to a running run are logged before it
    delivers them (`flushed` waits for the journal's task); the process dies; the next run, in another process, delivers them
    (it takes the session over once the dead process's short lease has expired)."""
    from conftest import drive
    from loopwright import Agent
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey
    from loopwright.testing import FunctionModel, Reply

    db = tmp_path / "db.sqlite"
    env = {**os.environ, LEASE_ENV: SHORT_LEASE}
    died = subprocess.run(
        [sys.executable, "-c", STEERED_WORKER, str(db)], env=env, capture_output=True
    )
    assert died.returncode == 9, died.stderr.decode()[-2000:]
    log = await open_log(db)
    logged = [e.event for e in await log.read(SessionKey("default", "agent", "s"))]
    assert [(e.mode, e.text) for e in logged if isinstance(e, ev.SteeringQueued)] == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]

    def heard(request):
        return Reply(text=" | ".join(m.content for m in request.messages if m.role == "user"))

    session = await open_session(Agent(model=FunctionModel(heard)), log, "s")
    assert session.state.queued == [
        ("steer", "mind the budget"),
        ("follow_up", "and say goodbye"),
    ]
    result = await drive(session.run("second"))
    injected = [(e.mode, e.message.content) for e in result.events if e.type == "steering:injected"]
    assert injected == [("steer", "mind the budget"), ("follow_up", "and say goodbye")]
    assert result.text == "first | second | mind the budget | and say goodbye"
    again = await open_session(Agent(model=FunctionModel(heard)), log, "s")
    assert again.state.queued == []  # delivered: nothing is sent twice
    await log.close()


async def test_a_cancel_drops_what_was_queued_in_the_log_too(tmp_path):
    from conftest import verify
    from loopwright import Agent
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey
    from loopwright.testing import ScriptedModel

    log = await open_log(tmp_path / "db.sqlite")
    session = await open_session(
        Agent(model=ScriptedModel.from_script([{"stall": 3600}])), log, "s"
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
    logged = [e.event.type for e in await log.read(SessionKey("default", "agent", "s"))]
    assert "steering:queued" in logged and "steering:injected" not in logged
    reopened = await open_session(Agent(model=ScriptedModel.from_script(["ok"])), log, "s")
    assert reopened.state.queued == []
    await log.close()
