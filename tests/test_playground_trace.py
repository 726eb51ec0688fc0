"""The playground's trace and titles, from a real SQLite log: a session's steps timed from the
log's commit times (`server.trace`), with their tokens, cost and timed tool calls; and a
session's title, its first user message (`runtime.titles`). The log's clock is the test's and
moves only when the model or the tool works, so every duration is exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopwright import Agent, tool
from loopwright.runtime import Runtime
from loopwright.runtime.titles import clip, title_of, titles
from loopwright.server.trace import trace
from loopwright.store.log import SessionKey
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.testing import FunctionModel, Reply
from runtime_fixtures import Clock

TENANT = "local"


def timed_agent(clock: Clock) -> Agent:
    """Its model takes 1.5 s for a tool call, 0.5 s for its answer, 0.25 s for an unpriced
    answer (a later turn); its tool takes 2.25 s."""

    @tool
    def weigh(parcel: str) -> str:
        """Weigh a parcel."""
        clock.advance(2.25)
        return f"{parcel}: 2 kg"

    def reply(request: Any) -> Reply:
        said = [m for m in request.messages if getattr(m, "role", "") == "user"]
        answered = any(getattr(m, "role", "") == "tool" for m in request.messages[-1:])
        if len(said) > 1:
            clock.advance(0.25)
            return Reply.parse({"text": "You are welcome.", "usage": _usage(40, 5)})
        if answered:
            clock.advance(0.5)
            return Reply.parse({"text": "It weighs 2 kg.", "usage": _usage(150, 30, 0.002)})
        clock.advance(1.5)
        entry = {
            "tool_calls": [{"name": "weigh", "id": "w1", "args": {"parcel": "P-7"}}],
            "usage": _usage(100, 20, 0.0012),
        }
        return Reply.parse(entry)

    return Agent(name="scales", model=FunctionModel(reply), tools=[weigh])


def _usage(given: int, said: int, cost: float | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": given, "output_tokens": said}
    return usage if cost is None else usage | {"cost": cost}


async def test_a_trace_times_each_step_and_tool_call_and_counts_tokens_and_cost(
    tmp_path: Path,
) -> None:
    clock = Clock()
    log = SQLiteLog(tmp_path / "loopwright.db", clock=clock)
    runtime = Runtime({"scales": timed_agent(clock)}, log)
    key = SessionKey(TENANT, "scales", "s1")
    try:
        for said in ("How heavy is parcel P-7?", "thanks"):
            run = await runtime.send(TENANT, "scales", "s1", said)
            done = await run.wait()
            assert done is not None and done.stop_reason == "completed", run.failure
        stored = await runtime.read(key)
    finally:
        await runtime.close()
        await log.close()

    at = {s.event.type + str(getattr(s.event, "step", "")): s.at for s in stored[:8]}
    start = at["input:received"]
    shown = trace(stored)
    [first, second, third] = shown["steps"]
    assert {k: first[k] for k in first if k != "tools"} == {
        "turn": 1,
        "step": 1,
        "startedAt": start,
        "finishedAt": first["tools"][0]["finishedAt"],
        "durationMs": 3750,  # the model's 1.5 s and the tool's 2.25 s
        "inputTokens": 100,
        "outputTokens": 20,
        "cost": 0.0012,
        "model": "function:inline",
    }
    assert first["tools"] == [
        {
            "id": "w1",
            "tool": "weigh",
            "startedAt": first["tools"][0]["startedAt"],
            "finishedAt": first["tools"][0]["finishedAt"],
            "durationMs": 2250,
            "status": "Approved.",
            "isError": False,
        }
    ]
    # the second step starts where the first ended, though its `step:finished` was committed
    # with the second step's reply
    assert (second["turn"], second["step"], second["startedAt"]) == (1, 2, first["finishedAt"])
    assert (second["durationMs"], second["inputTokens"], second["cost"]) == (500, 150, 0.002)
    assert second["tools"] == []
    assert (third["turn"], third["step"], third["durationMs"]) == (2, 1, 250)
    assert (third["inputTokens"], third["outputTokens"], third["cost"]) == (40, 5, None)
    assert shown["omitted"] == 0
    assert shown["totals"] == {
        "steps": 3,
        "durationMs": 4500,
        "inputTokens": 290,
        "outputTokens": 55,
        "cost": 0.0032,
    }


async def test_a_step_not_finished_has_no_duration_and_its_call_none_either(
    tmp_path: Path,
) -> None:
    """A run cut off while its tool runs (the log ends at the tool's intent)."""
    clock = Clock()
    log = SQLiteLog(tmp_path / "loopwright.db", clock=clock)
    runtime = Runtime({"scales": timed_agent(clock)}, log)
    try:
        run = await runtime.send(TENANT, "scales", "s1", "How heavy is parcel P-7?")
        assert (await run.wait()) is not None
        stored = await runtime.read(SessionKey(TENANT, "scales", "s1"))
    finally:
        await runtime.close()
        await log.close()
    cut = [s for s in stored if s.event.type != "tool:output"]
    cut = cut[: [s.event.type for s in cut].index("tool:started") + 1]
    [step] = trace(cut)["steps"]
    assert (step["finishedAt"], step["durationMs"]) == (None, None)
    assert [(c["tool"], c["finishedAt"], c["durationMs"], c["status"]) for c in step["tools"]] == [
        ("weigh", None, None, None)
    ]
    assert trace(cut)["totals"]["durationMs"] == 0


async def test_sessions_are_titled_by_their_first_user_message(tmp_path: Path) -> None:
    clock = Clock()
    log = SQLiteLog(tmp_path / "loopwright.db", clock=clock)
    runtime = Runtime({"scales": timed_agent(clock)}, log)
    first = "  How heavy\n is parcel   P-7?  "
    try:
        for session, said in (("s1", first), ("s1", "thanks"), ("s2", "x " * 60)):
            run = await runtime.send(TENANT, "scales", session, said)
            assert (await run.wait()) is not None
        keys = [SessionKey(TENANT, "scales", s) for s in ("s2", "s1")]
        named = await titles(runtime, [await runtime.session(k) for k in keys])
    finally:
        await runtime.close()
        await log.close()
    assert named == ["x " * 39 + "x…", "How heavy is parcel P-7?"]


def test_a_title_is_one_line_cut_at_a_word() -> None:
    assert clip("a\tb\n\nc") == "a b c"
    assert clip("word " * 30, 20) == "word word word word…"
    assert clip("x" * 30, 10) == "xxxxxxxxx…"  # no word ends near the limit: cut in the word
    assert title_of([]) is None
