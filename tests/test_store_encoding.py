"""What the event log's commits write, made cheaper (issue 32, goal 1): the same rows and texts.

A step commits twice (the reply with the call's intent, then the call's result), each commit's
events are serialised with one redaction screen over them all (`wire.dumps_all`), and a
commit's time is formatted without `datetime` for each (`sql.iso`)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from conftest import call
from loopwright import events as ev
from loopwright import redact, wire
from loopwright.messages import AssistantMessage, Text
from loopwright.runtime import Settings
from loopwright.runtime.journal import session_in_log
from loopwright.store.sql import iso
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs)
from runtime_fixtures import KEY, payer


def _datetime_iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_iso_is_datetimes_to_the_millisecond():
    """Rounded to the microsecond half to even, then cut, as `datetime` does (a half
    microsecond below a whole second carries into it)."""
    rng = random.Random(32)
    edges = [0.0, 0.0005, 0.9995, 0.9999994, 0.9999995, 1.0000005, 59.9999996, 86399.9999999]
    days = [1_764_000_000 + e for e in edges] + [253402300799.9994]
    anywhere = [rng.uniform(0, 4e9) for _ in range(20_000)]
    micro = [
        int(rng.uniform(0, 2e9)) + k / 1e6 + half
        for k in range(0, 10**6, 991)
        for half in (0, 5e-7)
    ]
    for t in edges + days + anywhere + micro:
        assert iso(t) == _datetime_iso(t), t


def test_a_commits_texts_are_each_events_dumps():
    """One screen over a commit's events, a secret in one of them: each text is `dumps`'s."""
    redact.register("hunter2-and-more")
    try:
        events = [
            ev.StepStarted(step=1),
            ev.MessageCompleted(message=AssistantMessage(parts=(Text(text="plain"),))),
            ev.MessageCompleted(
                message=AssistantMessage(parts=(Text(text="key sk-abcdefghij0123456789xyz"),))
            ),
            ev.LoopDone(text="the password is hunter2-and-more"),
        ]
        texts = wire.dumps_all(events)
        assert texts == [wire.dumps(e) for e in events]
        assert "sk-abcdefghij" not in texts[2] and "hunter2" not in texts[3]
        assert wire.dumps_all(events[:2]) == [wire.dumps(e) for e in events[:2]]
    finally:
        redact.forget("hunter2-and-more")


async def test_a_step_commits_twice(logs):
    """The reply is committed with the call's intent (a crash between them loses the reply: the
    model is asked again), then the call's result; the run's end with the last reply. Before:
    the reply was a commit of its own (3 a step)."""
    log = await logs()
    agent = payer(
        {"tool_calls": [call("look", "l1", n=1)]}, {"tool_calls": [call("look", "l2", n=2)]}, "seen"
    )
    session = await session_in_log(log, agent, KEY, Settings())
    before = log._runner.transactions
    result = await session.run("go").result()
    assert result.text == "seen"
    # the claim, the input; a step: reply + intent, then result; the last reply with the end;
    # the release (before: 10)
    assert log._runner.transactions - before == 2 + 2 * 2 + 1 + 1
    stored = [s.event.type for s in await log.read(KEY)]
    assert stored.count("message:completed") == 3 and stored[-1] == "done"
