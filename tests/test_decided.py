"""P4, issue 30: a decision, once accepted, is acted on, and the decider is told what really
happened — through the server, whatever happened between the decision and the run going on.

- Window 1: a server killed right after it committed an approval (`LOOPWRIGHT_CRASH_AFTER=
  pending:decided`, before it resumed the run) left the session paused with its item decided:
  approving again answered "already resolved" and resumed nothing, and every new message got a
  409. Now the next decision, or the next message, resumes the decided batch.
- Window 3: an approval recorded as a run whose client had just dropped its held stream was
  pausing was answered with that pause ("Paused: waiting for approval of refund."), while the
  run resumed in the background. Now the answer is the resumed run's. The race is made certain
  here by holding the pausing run's commit until the decision is recorded and its door has
  looked at the run (the log's methods, wrapped in this process, where the server runs).

(Window 2, the CLI's, is in test_cli_race.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import make_project, serving
from loopwright import Approval
from loopwright import events as ev
from loopwright.runtime import Runtime
from loopwright.runtime.commits import CRASH_ENV
from loopwright.store import StoredEvent
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log
from loopwright.store.sqlite_log import SQLiteLog
from test_cli import LOOPWRIGHT
from test_server_stream import stream
from workers.pending_agent import SESSION, TENANT, agents

SAFETY = 60
"""Seconds after which a wait fails the test instead of hanging it (none waits that long)."""
ENV = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_HOME", CRASH_ENV)}
WORKER = Path(__file__).parent / "workers" / "pending_agent.py"


class Served:
    """`loopwright serve` in a process of its own, on a free loopback port."""

    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [LOOPWRIGHT, "serve", "--project", str(project), "--port", "0"],
            env=ENV | env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        stderr = self.process.stderr
        assert stderr is not None
        self.reader = threading.Thread(target=lambda: [lines.put(x) for x in stderr])
        self.reader.start()
        self.url = ""
        while not self.url:
            line = lines.get(timeout=SAFETY)
            found = re.search(r"^playground: (\S+)/playground$", line)
            self.url = found[1] if found else ""

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(SAFETY)
        self.reader.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code


@contextlib.contextmanager
def served(project: Path, env: dict[str, str]) -> Iterator[Served]:
    server = Served(project, env)
    try:
        yield server
    finally:
        server.stop()


async def read_log(project: Path, sid: str, url: str | None = None) -> list[StoredEvent]:
    log = await open_log(url or project / ".loopwright" / "loopwright.db")
    try:
        return await log.read(SessionKey("default", "shop", sid))
    finally:
        await log.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("then", ["approved again", "a new message"])
def test_a_decision_committed_just_before_a_crash_is_acted_on(
    tmp_path: Path, then: str, backend: str, request: pytest.FixtureRequest
):
    project = make_project(tmp_path / "shop")
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    store = {"LOOPWRIGHT_STORE_URL": url} if url else {}
    with served(project, store | {CRASH_ENV: "pending:decided"}) as crashing:
        with httpx.Client(base_url=crashing.url, timeout=SAFETY) as http:
            paused = http.post("/agents/shop/messages", json={"message": "refund A-1"})
            assert paused.status_code == 202, paused.text
            sid, pid = paused.json()["sessionId"], paused.json()["id"]
            with pytest.raises(httpx.TransportError):  # killed once the approval committed
                http.post(f"/approvals/{pid}/approve", json={"by": "ana"})
        assert crashing.process.wait(SAFETY) == 86
    with (
        served(project, store) as server,
        httpx.Client(base_url=server.url, timeout=SAFETY) as http,
    ):
        if then == "approved again":
            again = http.post(f"/approvals/{pid}/approve", json={"by": "bo"})
            assert again.status_code == 200, again.text
            answer = again.json()
            assert {k: v for k, v in answer.items() if k != "events"} == {
                "alreadyResolved": True,  # ana's decision stands: bo's changed nothing
                "id": pid,
                "status": "approved",
                "decidedBy": "loopback",  # (the server's principal; ana is the note below)
                "sessionId": sid,
                "text": "Done: refunded 5 on A-1",  # ... and the run it was never acted on
                "stopReason": "completed",
            }
        else:
            sent = http.post("/agents/shop/messages", json={"message": "thanks", "sessionId": sid})
            assert sent.status_code == 200, sent.text
            assert sent.json()["text"] == "heard: refund A-1 | thanks"
        assert http.get(f"/agents/shop/sessions/{sid}").json()["status"] == "idle"
    log = [s.event for s in asyncio.run(read_log(project, sid, url))]
    decided = [(e.id, e.status, e.by, e.reason) for e in log if isinstance(e, ev.PendingDecided)]
    assert decided == [
        (pid, "approved", "loopback", "(name given by the caller, not verified: ana)")
    ]
    started = [e for e in log if isinstance(e, ev.ToolStarted)]
    assert [e.tool for e in started] == ["refund"]  # the approved call ran, once
    dones = [(e.text, e.stop_reason) for e in log if isinstance(e, ev.Done)]
    assert dones[:2] == [
        ("Paused: waiting for approval of refund.", "paused"),
        ("Done: refunded 5 on A-1", "completed"),
    ]
    assert len(dones) == (2 if then == "approved again" else 3)


def test_an_approval_as_a_dropped_stream_pauses_is_answered_by_the_resumed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    reached, looked = threading.Event(), threading.Event()
    decided = False
    append, decide, pending = SQLiteLog.append, SQLiteLog.decide, SQLiteLog.pending

    async def held_pause(self: SQLiteLog, lease: Any, events: list[ev.Event]) -> int:
        """The pause of the run whose stream was dropped waits for the decision."""
        if any(isinstance(e, ev.LoopPaused) for e in events):
            reached.set()
            assert await asyncio.to_thread(looked.wait, SAFETY)
        return await append(self, lease, events)

    async def deciding(self: SQLiteLog, *args: Any, **kwargs: Any) -> Any:
        nonlocal decided
        done = await decide(self, *args, **kwargs)
        decided = True
        return done

    async def listing(self: SQLiteLog, *args: Any, **kwargs: Any) -> Any:
        page = await pending(self, *args, **kwargs)
        if decided:  # the decision is in, and the runtime looks at what is left open: the
            looked.set()  # run it finds is the one pausing
        return page

    monkeypatch.setattr(SQLiteLog, "append", held_pause)
    monkeypatch.setattr(SQLiteLog, "decide", deciding)
    monkeypatch.setattr(SQLiteLog, "pending", listing)
    with serving(tmp_path / "shop") as server, server.client() as http:
        with stream(http, "refund A-1") as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and '"pending:requested"' in line:
                    pid = re.search(r'"id": ?"([^"]+)"', line)[1]  # type: ignore[index]
                    break
        assert reached.wait(SAFETY)  # nobody follows the run: it is pausing
        answer = http.post(f"/pending-approvals/{pid}/resolve", json={"decision": "approve"})
        assert answer.status_code == 200, answer.text
        sid = answer.json()["sessionId"]
        assert answer.json() == {
            "text": "Done: refunded 5 on A-1",
            "sessionId": sid,
            "stopReason": "completed",
        }
    log = [s.event for s in asyncio.run(read_log(tmp_path / "shop", sid))]
    dones = [(e.text, e.stop_reason) for e in log if isinstance(e, ev.Done)]
    assert dones == [  # (the window was hit: the run paused after the decision)
        ("Paused: waiting for approval of refund.", "paused"),
        ("Done: refunded 5 on A-1", "completed"),
    ]
    assert [e.tool for e in log if isinstance(e, ev.ToolStarted)] == ["refund"]


@pytest.mark.parametrize("then", ["a new message", "resume"])
def test_a_decision_for_a_run_killed_at_its_prompt_is_acted_on_after_its_lease(
    tmp_path: Path, then: str, monkeypatch: pytest.MonkeyPatch
):
    """Window 2's other half: a run held at its ask is killed (SIGKILL) and its item decided
    within its lease, without resuming (nobody could: its lease holds the session). Once the
    lease has expired (here: a log whose clock runs an hour ahead), the next message or
    resumption takes the session over, logs the pause the dead run did not reach, and goes on
    with the decision: the approved call runs once. (It said "its run died waiting on pending
    items …: resolve them, then resume" although they were resolved, or "no paused run".)"""
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("LEDGER", str(ledger))  # (the tools run in the worker, then here)
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path / "db"), "held", "refund 1"],
        env=ENV | {"LEDGER": str(ledger)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    asked = worker.stdout.readline().split()
    assert asked[0] == "asked", asked
    worker.kill()
    assert worker.wait(SAFETY) == -signal.SIGKILL
    worker.stdout.close()

    async def decide_then_go_on() -> tuple[str, str, list[ev.Event]]:
        within = SQLiteLog(tmp_path / "db")
        later = SQLiteLog(tmp_path / "db", clock=lambda: time.time() + 3600)
        first, second = Runtime(agents(), within), Runtime(agents(), later)
        try:
            decided = await first.resolve(
                TENANT, asked[1], Approval.approve(by="ana"), resume=False
            )
            if then == "a new message":
                run = await second.send(TENANT, "payer", SESSION, "thanks")
            else:
                run = await second.resume(TENANT, "payer", SESSION)
            done = await run.wait()
            assert done is not None
            log = [s.event for s in await later.read(SessionKey(TENANT, "payer", SESSION))]
            return decided.status, done.stop_reason, log
        finally:
            for runtime, log in ((first, within), (second, later)):
                await runtime.close()
                await log.close()

    status, stop, log = asyncio.run(decide_then_go_on())
    assert (status, stop) == ("waiting", "completed")
    assert sorted(ledger.read_text().splitlines()) == ["fetch fetch-1", "refund refund-1"]
    assert not any(isinstance(e, ev.RunInterrupted) for e in log)
    dones = [(e.text, e.stop_reason) for e in log if isinstance(e, ev.Done)]
    assert dones[0][1] == "paused" and dones[1] == ("done", "completed")
    if then == "a new message":
        assert dones[2:] == [("ok", "completed")]
        [said] = [e for e in log if isinstance(e, ev.InputReceived)][1:]
        assert said.message.content == "thanks"
