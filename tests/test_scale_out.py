"""Issue 13's multi-process test: three `loopwright serve` processes on one PostgreSQL database
serve a few hundred sessions (`--long`; a dozen by default). Messages, approvals and held
streams go to random processes (a run asks on one, is approved on another, and is watched from
the third), and one process is killed (SIGKILL) midway: after a number of acknowledged
commands, at the moment a run of it waits on its approval. Its leases are short
(`LOOPWRIGHT_LEASE_SECONDS`), so the survivors take its sessions over.

Then: every acknowledged command (a 200 or 202 answer) is in the log; no tool ran twice (each
real execution appends its call id to a record file); every held stream saw every committed
event of its run once and in order — one held on the killed process saw a gapless prefix, and
its reconnection with `Last-Event-ID` on a survivor gives the rest; and every session ends
usable: a last message gets a normal answer from a survivor.

The random choices come from a seed, printed (`SCALE_OUT_SEED=N` runs that seed again); the
interleaving of the processes is the machine's.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from long_run import examples
from scale_cluster import SAFETY, Frame, Served, Stream, env_for, make_project

SESSIONS = examples(quick=12, long=300)
AT_ONCE = examples(quick=6, long=30)
"""Sessions going on at the same time."""
LEASE = 4.0
POLL = 0.05
"""Seconds between two looks at a session that still runs (the survivors wait for the killed
process's leases to expire)."""
AGENT = "/agents/payer"
Log = list[tuple[int, dict[str, Any]]]


@dataclass
class Round:
    """One payment asked for in a session: where its message, its approval and its watcher go
    (process numbers, drawn beforehand), and whether the message holds its stream."""

    held: bool
    send: int
    decide: int
    watch: int | None


@dataclass
class Held:
    """A stream held on a session: from `after` (None: from the start of the run that took
    `sent`, the message it posted), and its reconnection on a survivor when it broke."""

    stream: Stream
    after: int | None
    sent: str = ""
    again: Stream | None = None


@dataclass
class Life:
    sid: str
    rounds: list[Round]
    messages: list[str] = field(default_factory=list)
    """The texts of its acknowledged messages."""
    decisions: list[tuple[str, str, str]] = field(default_factory=list)
    """(item, status, by) of its items, as the answers to its acknowledged decisions say."""
    streams: list[Held] = field(default_factory=list)
    final: dict[str, Any] | None = None
    killed: str | None = None
    """The item its run waited on, live, when its process was killed."""


class Cluster:
    """The processes, their clients, the acknowledgements counted, and the kill."""

    def __init__(self, servers: list[Served], rng: random.Random, kill_after: int) -> None:
        self.servers = servers
        self.http = [httpx.AsyncClient(base_url=s.url, timeout=SAFETY) for s in servers]
        self.rng = rng
        self.victim = rng.randrange(len(servers))
        self.kill_after = kill_after
        self.acks = 0
        self.killed_at: int | None = None
        self.broken = 0
        self.streams: list[Stream] = []

    def stream(self, n: int, method: str, path: str, **kwargs: Any) -> Stream:
        """A stream held on process `n`."""
        self.streams.append(Stream(self.http[n], method, path, **kwargs))
        return self.streams[-1]

    def alive(self, n: int) -> int:
        """Process `n`, or the next one alive."""
        while not self.servers[n].alive:
            n = (n + 1) % len(self.servers)
        return n

    def survivor(self) -> int:
        return self.alive(self.rng.randrange(len(self.servers)))

    def ack(self) -> None:
        self.acks += 1

    def due(self) -> bool:
        return self.killed_at is None and self.acks >= self.kill_after

    async def kill(self) -> None:
        self.killed_at = self.acks
        await asyncio.to_thread(self.servers[self.victim].kill)

    async def close(self) -> None:
        """Close the streams still open (after a failure) and the clients."""
        await cancelled([s.task for s in self.streams])
        for http in self.http:
            await http.aclose()


async def every(*jobs: Awaitable[None]) -> None:
    """Run `jobs` together; when one fails, the others are cancelled."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        await asyncio.gather(*tasks)
    finally:
        await cancelled(tasks)


async def cancelled(tasks: list[asyncio.Future[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def post(cluster: Cluster, n: int, path: str, body: dict[str, Any]) -> httpx.Response | None:
    """The answer of process `n`, or None when its connection failed (it was killed)."""
    try:
        return await cluster.http[n].post(path, json=body)
    except httpx.TransportError:
        return None


async def decide(cluster: Cluster, life: Life, n: int, item: str, by: str) -> bool:
    """Approve `item` on process `n` (on a survivor again if that one dies on it); whether the
    run went on to its end (a 200 with the run's answer, or one saying it was decided so)."""
    while True:
        answer = await post(cluster, cluster.alive(n), f"/approvals/{item}/approve", {"by": by})
        if answer is not None:
            break
        n = cluster.survivor()
    if answer.status_code == 409:  # the run waiting on it died with its process
        assert "died" in answer.json()["error"], answer.text
        return False
    assert answer.status_code == 200, answer.text
    cluster.ack()
    body = answer.json()
    if body.get("alreadyResolved"):
        # decided by this very request, lost with its process (never closed by a survivor
        # that took over the session after the run asking died: it logs that run paused, P4)
        decided = (body["status"], body["decidedBy"])
        assert decided == ("approved", "loopback"), body  # (`check_log` checks its note)
        life.decisions.append((item, "approved", by))
        return False
    life.decisions.append((item, "approved", by))
    assert (body["text"], body["stopReason"]) == ("settled", "completed"), body
    return True


def watch(cluster: Cluster, life: Life, n: int, path: str, **kwargs: Any) -> Held:
    after = kwargs.pop("after", None)
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    held = Held(cluster.stream(cluster.alive(n), "GET", path, headers=headers), after)
    life.streams.append(held)
    return held


async def play(cluster: Cluster, life: Life, number: int, round: Round) -> bool:
    """One round of a session; whether the session goes on normally after it."""
    text = f"pay {life.sid}-{number}"
    body = {"message": text, "sessionId": life.sid}
    send = cluster.alive(round.send)
    if cluster.due():  # the kill comes at a run of the victim waiting on its approval
        round.held, send = True, cluster.victim
    if round.held:
        stream = cluster.stream(send, "POST", f"{AGENT}/messages/stream", json=body)
        life.streams.append(Held(stream, None, text))
        if await stream.head() != 200:
            assert stream.broken is not None, (stream.status, stream.body)
            return False
        cluster.ack()
        life.messages.append(text)
        asked = await stream.until(lambda e: e["type"] == "pending:requested")
        if asked is None:
            return False
        item = asked["id"]
        if send == cluster.victim and cluster.due():
            life.killed = item
            await cluster.kill()
    else:
        answer = await post(cluster, send, f"{AGENT}/messages", body)
        if answer is None:
            return False
        assert answer.status_code == 202, answer.text
        cluster.ack()
        life.messages.append(text)
        item = answer.json()["id"]
    if round.watch is not None:
        path = f"{AGENT}/sessions/{life.sid}/stream"
        watcher = watch(cluster, life, round.watch, path, after=0)
        await watcher.stream.until(lambda e: e["type"] == "pending:requested")
    if not await decide(cluster, life, round.decide, item, f"ops-{life.sid}-{number}"):
        return False
    for held in life.streams:
        await held.stream.end()  # each ends with the round's run (or broke)
    return not any(h.stream.broken for h in life.streams)


async def live(cluster: Cluster, life: Life, slots: asyncio.Semaphore) -> None:
    async with slots:
        for number, round in enumerate(life.rounds):
            if not await play(cluster, life, number, round):
                return


async def reconnect(cluster: Cluster, life: Life) -> None:
    """A stream that broke with its process goes on from its last id on a survivor."""
    for held in life.streams:
        if held.stream.broken is None or held.stream.status is None or held.again is not None:
            continue  # (a stream refused by the killed process was never held)
        cluster.broken += 1
        last = held.stream.ids()[-1:] or [await start_of(cluster, life, held)]
        path = f"{AGENT}/sessions/{life.sid}/stream"
        headers = {"Last-Event-ID": str(last[0])}
        held.again = cluster.stream(cluster.survivor(), "GET", path, headers=headers)


async def start_of(cluster: Cluster, life: Life, held: Held) -> int:
    """Where a stream that carried no id started: its `after`, or its run's start."""
    if held.after is not None:
        return held.after
    return run_start(await read_log(cluster.http[cluster.survivor()], life.sid), held)


def run_start(log: Log, held: Held) -> int:
    """The seq before the `session` event of the run that took the message a POST stream
    sent (the stream's first event)."""
    took = next(
        s for s, e in log if e["type"] == "input:received" and e["message"]["content"] == held.sent
    )
    return max(s for s, e in log if e["type"] == "session" and s < took) - 1


async def settle(cluster: Cluster, life: Life) -> None:
    """Bring the session to a normal answer on survivors: wait while a run holds it (the killed
    process's leases expire), approve what it waits on, resume it if paused, then send it a
    last message."""
    deadline = time.monotonic() + SAFETY
    text = f"last {life.sid}"
    while True:
        assert time.monotonic() < deadline, f"session {life.sid} is stuck"
        n = cluster.survivor()
        shown = await cluster.http[n].get(f"{AGENT}/sessions/{life.sid}")
        if shown.status_code == 200 and shown.json()["status"] == "running":
            await asyncio.sleep(POLL)
            continue
        waiting = shown.json()["pending"] if shown.status_code == 200 else []
        if waiting:
            await decide(cluster, life, n, waiting[0]["id"], f"last-{life.sid}")
            continue
        if shown.status_code == 200 and shown.json()["status"] == "paused":
            resumed = await cluster.http[n].post(f"{AGENT}/sessions/{life.sid}/resume")
            assert resumed.status_code in (200, 409), resumed.text
            continue
        answer = await cluster.http[n].post(
            f"{AGENT}/messages", json={"message": text, "sessionId": life.sid}
        )
        if answer.status_code == 409:  # taken by a run meanwhile
            continue
        assert answer.status_code == 200, answer.text
        cluster.ack()
        life.messages.append(text)
        life.final = answer.json()
        return


async def read_log(http: httpx.AsyncClient, sid: str) -> Log:
    out: Log = []
    after = 0
    while True:
        page = await http.get(f"{AGENT}/sessions/{sid}/events", params={"after": after})
        assert page.status_code == 200, page.text
        body = page.json()
        out += [(e["seq"], e["event"]) for e in body["events"]]
        if not body.get("more"):
            return out
        after = body["nextAfter"]


def check_log(life: Life, log: Log) -> None:
    assert [seq for seq, _ in log] == list(range(1, len(log) + 1)), life.sid  # gapless
    inputs = Counter(e["message"]["content"] for _, e in log if e["type"] == "input:received")
    assert all(inputs[text] == 1 for text in life.messages), (life.sid, inputs, life.messages)
    decided = {e["id"]: e for _, e in log if e["type"] == "pending:decided"}
    for item, status, by in life.decisions:
        recorded = decided[item]  # by the server's principal; the body's `by` is a note
        note = f"(name given by the caller, not verified: {by})"
        assert (recorded["status"], recorded["by"], recorded["reason"]) == (
            status,
            "loopback",
            note,
        ), life.sid
    assert life.final is not None
    assert (life.final["text"], life.final["stopReason"]) == (f"ok: last {life.sid}", "completed")


def check_stream(life: Life, log: Log, held: Held) -> None:
    """Its events are the log's from where it started, in order, each id the seq of that very
    event; it ended at its run's end (a `done` that is not a pause), or broke with its process
    after a gapless prefix (its events past the last id may never have been committed), and its
    reconnection carries the rest."""
    stream = held.stream
    if stream.status is None:
        return  # refused by the killed process: never held
    after = held.after if held.after is not None else run_start(log, held)
    seen = [(seq, e) for seq, e in stream.frames if not e["type"].endswith(":delta")]
    if stream.broken is not None:
        ids = [i for i, (seq, _) in enumerate(seen) if seq is not None]
        seen = seen[: ids[-1] + 1] if ids else []
        assert held.again is not None and held.again.broken is None, life.sid
    stored = [(seq, e) for seq, e in log if seq > after and e["type"] != "message:partial"]
    assert [e for _, e in seen] == [e for _, e in stored[: len(seen)]], (life.sid, after)
    for (got, _), (seq, _) in zip(seen, stored, strict=False):
        assert got in (None, seq), (life.sid, got, seq)
    if held.again is not None:
        assert held.again.status == 200 and held.again.broken is None, life.sid
        last = ([seq for seq, _ in seen if seq is not None] or [after])[-1]
        if held.again.frames or not ended(seen):  # (it may have broken right after its end)
            check_stream(life, log, Held(held.again, last))
        return
    assert stream.status == 200, (life.sid, stream.status, stream.body)
    assert ended(seen), (life.sid, seen[-1:])


def ended(seen: list[Frame]) -> bool:
    """Whether a stream's last event ends its run for good (a `done` that is not a pause)."""
    return bool(seen) and seen[-1][1]["type"] == "done" and seen[-1][1]["stopReason"] != "paused"


def was_taken_over(life: Life, log: Log) -> bool:
    """Whether a survivor took the session over from the killed process: it recovered a dead
    run's batch (`run:interrupted`), or logged the pause of the run that died waiting live on
    its approval (P4: the item stayed open, or the decision recorded meanwhile resumed it)."""
    if any(e["type"] == "run:interrupted" for _, e in log):
        return True
    if life.killed is None:
        return False
    kinds = [e["type"] for _, e in log]
    at = [(e["type"], e.get("id")) for _, e in log].index(("pending:requested", life.killed))
    paused = ["actauth:decision", "step:finished", "loop:paused", "done"]
    after = [k for k in kinds[at + 1 :] if k != "pending:decided"]  # (decided meanwhile)
    assert after[:4] == paused, (life.sid, kinds[at:])
    return True


def check_record(record: Path, logs: dict[str, Log]) -> int:
    """No call ran twice; each ran under its logged intent, and a call whose result says it
    ran did run (once)."""
    ran = Counter(record.read_text().splitlines()) if record.exists() else Counter()
    twice = {call: n for call, n in ran.items() if n > 1}
    assert not twice, twice
    started = {e["id"] for log in logs.values() for _, e in log if e["type"] == "tool:started"}
    assert set(ran) <= started, set(ran) - started
    done = {
        e["id"]
        for log in logs.values()
        for _, e in log
        if e["type"] == "tool:output" and not e.get("isError")
    }
    assert done <= set(ran), done - set(ran)
    return len(ran)


def plan(rng: random.Random, sessions: int, processes: int) -> list[Life]:
    def where() -> int:
        return rng.randrange(processes)

    lives = []
    for n in range(sessions):
        rounds = [
            Round(rng.random() < 0.5, where(), where(), where() if rng.random() < 0.5 else None)
            for _ in range(rng.randint(1, 2))
        ]
        lives.append(Life(f"s{n:03d}", rounds))
    return lives


@pytest.mark.long
async def test_three_servers_on_one_database_survive_a_kill(tmp_path: Path, pg_url: str) -> None:
    seed = int(os.environ.get("SCALE_OUT_SEED") or random.randrange(1 << 32))
    print(f"scale-out seed: {seed} (SCALE_OUT_SEED={seed} runs it again)")
    rng = random.Random(seed)
    lives = plan(rng, SESSIONS, 3)
    planned = sum(2 * len(life.rounds) for life in lives)
    record = tmp_path / "record.txt"
    env = env_for(pg_url, record, LEASE)
    root = make_project(tmp_path / "project")
    servers = [Served(root, env) for _ in range(3)]
    began = time.monotonic()
    try:
        for server in servers:
            server.started()
        cluster = Cluster(servers, rng, rng.randrange(planned // 5, planned // 3))
        try:
            slots = asyncio.Semaphore(AT_ONCE)
            await every(*(live(cluster, life, slots) for life in lives))
            assert cluster.killed_at is not None, "the kill never came"
            killed, acked_before = time.monotonic(), cluster.acks
            for life in lives:
                await reconnect(cluster, life)
            await every(*(settle(cluster, life) for life in lives))
            for life in lives:
                for held in life.streams:
                    await held.stream.end()
                    if held.again is not None:
                        await held.again.end()
            logs = {
                life.sid: await read_log(cluster.http[cluster.survivor()], life.sid)
                for life in lives
            }
        finally:
            await cluster.close()
    finally:
        stderr = [server.stop() for server in servers]
    for life in lives:
        check_log(life, logs[life.sid])
        for held in life.streams:
            check_stream(life, logs[life.sid], held)
    ran = check_record(record, logs)
    taken_over = sum(was_taken_over(life, logs[life.sid]) for life in lives)
    assert cluster.broken >= 1 and taken_over >= 1  # the kill did hit streams and runs
    streams = sum(len(life.streams) for life in lives)
    print(
        f"scale-out: {len(lives)} sessions, {cluster.acks} acknowledged commands "
        f"({acked_before} before the last message of each), {streams} held streams "
        f"({cluster.broken} broken by the kill), process {cluster.victim} killed after "
        f"{cluster.killed_at} acknowledgements, {taken_over} sessions taken over, "
        f"{ran} tool executions; {killed - began:.1f} s to the kill and the rounds' end, "
        f"{time.monotonic() - killed:.1f} s to settle"
    )
    for text in stderr:
        assert "Traceback" not in text, text[-3000:]


async def test_the_approval_of_a_run_whose_process_died_is_answered(tmp_path: Path, pg_url: str):
    """A run waits on its approval on one process, which is killed; the approval, sent to the
    other one before the dead process's lease expires, is recorded, and once the lease has
    expired that process takes the session over: the dead run is logged paused on the item (its
    calls had not started), resumed with the decision, and the answer is the resumed run's
    `done` (P4: not a 409 that leaves the approved call interrupted)."""
    record = tmp_path / "record.txt"
    root = make_project(tmp_path / "project")
    servers = [Served(root, env_for(pg_url, record, LEASE)) for _ in range(2)]
    try:
        first, second = (httpx.AsyncClient(base_url=s.started(), timeout=SAFETY) for s in servers)
        async with first, second:
            body = {"message": "pay o1", "sessionId": "s1"}
            held = Stream(first, "POST", f"{AGENT}/messages/stream", json=body)
            asked = await held.until(lambda e: e["type"] == "pending:requested")
            assert asked is not None
            await asyncio.to_thread(servers[0].kill)
            item = asked["id"]
            answer = await second.post(f"/approvals/{item}/approve", json={"by": "ops"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["text"] == "settled"
            log = [e for _, e in await read_log(second, "s1")]
    finally:
        for server in servers:
            server.stop()
    assert sorted(record.read_text().splitlines()) == ["note-o1", "pay-o1"]  # each ran once
    decided = [e for e in log if e["type"] == "pending:decided"]
    assert [(e["id"], e["status"], e["by"]) for e in decided] == [(item, "approved", "loopback")]
    kinds = [e["type"] for e in log]
    assert "run:interrupted" not in kinds
    paused = kinds.index("loop:paused")
    assert kinds[paused - 1 : paused + 3] == ["step:finished", "loop:paused", "done", "session"]
    assert kinds[-2:] == ["loop:done", "done"]
