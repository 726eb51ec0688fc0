"""Budget and compaction (SPEC §6): triggers, summaries, never splitting a tool call from its
result, prompt-too-long recovery, persistence in the log, trace rotation."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given
from hypothesis import strategies as st

from conftest import assert_history_valid, drive, run_agent, scripted
from loopwright import Agent, Session, tool
from loopwright.agent import RetryPolicy
from loopwright.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.models import ModelFailure, ModelRequest
from loopwright.state.compaction import SUMMARY_HEADER, SUMMARY_SYSTEM, Compaction, split_point
from loopwright.testing import FunctionModel, Reply, types


@tool
def read_page(n: int) -> str:
    """Read a long page."""
    return f"page {n}: " + "lorem ipsum " * 40


def realistic(request: ModelRequest) -> Reply:
    """Reports input tokens like a provider would (about four characters a token); asks for a
    page per turn, answers summaries, finishes after page 9."""
    used = sum(len(str(m)) for m in request.messages) // 4 + len(request.system) // 4
    usage = Usage(input_tokens=used, output_tokens=10)
    if request.system == SUMMARY_SYSTEM:
        return Reply(text="The user reads pages; pages so far were lorem ipsum.", usage=usage)
    pages = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    last = request.messages[-1]
    n = int(last.content.split(":")[0].split()[1]) + 1 if isinstance(last, ToolResultMessage) else 0
    if n >= 10 or (pages and n == 0):
        return Reply(text="all read", usage=usage)
    return Reply(tool_calls=(ToolCall(id=f"p{n}", name="read_page", args={"n": n}),), usage=usage)


def agent(model=realistic, retry: RetryPolicy | None = None, **kw):
    return Agent(
        model=FunctionModel(model),
        tools=[read_page],
        context_budget=900,
        compaction=Compaction(keep_last=4, at_ratio=0.8, **kw),
        max_turns=20,
        retry=retry or RetryPolicy(),
    )


async def test_a_long_session_stays_under_its_budget_through_compaction():
    session = Session(agent())
    result = await drive(session.run("read all pages"))
    assert result.text == "all read"
    checks = [e for e in result.events if e.type == "budget:check"]
    finished = [e for e in result.events if e.type == "compaction:finished"]
    assert len(finished) >= 2 and all(f.mode == "summarize" and f.summary for f in finished)
    assert max(c.used_tokens for c in checks) < 900
    assert isinstance(session.messages[0], UserMessage)
    assert session.messages[0].content.startswith(SUMMARY_HEADER)
    assert_history_valid(session.messages)
    names = types(result.events)
    first = names.index("compaction:started")
    assert names[first - 1] == "budget:check" and names[first + 1] == "compaction:finished"


async def test_discard_mode_drops_without_asking_the_model():
    seen = []

    def model(request):
        seen.append(request.system)
        return realistic(request)

    session = Session(agent(model, mode="discard"))
    result = await drive(session.run("read all pages"))
    assert SUMMARY_SYSTEM not in seen
    finished = [e for e in result.events if e.type == "compaction:finished"]
    assert finished and all(f.mode == "discard" and f.summary is None for f in finished)
    assert_history_valid(session.messages)


async def test_a_failed_summary_falls_back_to_discarding():
    def model(request):
        if request.system == SUMMARY_SYSTEM:
            return Reply(fail=ModelFailure(error="down"))
        return realistic(request)

    session = Session(agent(model))
    result = await drive(session.run("read all pages"))
    assert {e.mode for e in result.events if e.type == "compaction:finished"} == {"discard"}


async def test_a_summary_past_the_request_deadline_falls_back_to_discarding():
    """The summary is a model request like any: under the run's deadline (a provider that
    trickles keep-alives forever would otherwise hold the run)."""
    stalled = asyncio.Event()

    async def never() -> Reply:
        stalled.set()
        await asyncio.Event().wait()  # (only the deadline ends it)
        raise AssertionError("unreachable")

    def model(request):
        return never() if request.system == SUMMARY_SYSTEM else realistic(request)

    session = Session(agent(model, RetryPolicy(deadline=0.5)))
    async with asyncio.timeout(60):  # (a safety net: without the deadline, it waits forever)
        result = await drive(session.run("read all pages"))
    assert stalled.is_set() and result.text == "all read"
    assert {e.mode for e in result.events if e.type == "compaction:finished"} == {"discard"}


async def test_a_prompt_rejected_as_too_long_is_compacted_and_sent_once_more():
    model = scripted(
        "first answer",
        {"fail": {"error": "prompt is too long", "prompt_too_long": True}},
        "the summary",
        "second answer",
    )
    session = Session(Agent(model=model, compaction=Compaction(keep_last=1)))
    await drive(session.run("one"))
    result = await drive(session.run("two"))
    assert result.text == "second answer"
    names = types(result.events)
    assert names[names.index("compaction:finished") + 1] == "prompt:compaction"
    compaction = next(e for e in result.events if e.type == "prompt:compaction")
    assert (compaction.from_, compaction.to) == (3, 2)
    assert model.requests[2].system == SUMMARY_SYSTEM
    assert [m.content for m in model.requests[3].messages] == [
        f"{SUMMARY_HEADER}\nthe summary",
        "two",
    ]


async def test_a_prompt_still_too_long_after_compacting_ends_the_run():
    failure = {"fail": {"error": "prompt is too long", "prompt_too_long": True}}
    model = scripted(failure, failure)
    result = await run_agent(Agent(model=model))
    assert (result.stop_reason, result.events[-2].error) == (
        "error",
        "model request failed: prompt is too long",
    )


async def test_compaction_on_demand_and_the_compactability_probe():
    from loopwright.state.compaction import compactability

    model = scripted("a", "b", "summary of a and b")
    session = Session(Agent(model=model, compaction=Compaction(keep_last=2)))
    assert compactability(session.history, Compaction(keep_last=2)) == "empty"
    await drive(session.run("one"))
    await drive(session.run("two"))
    assert compactability(session.history, Compaction(keep_last=2)) == "ok"
    result = await drive(session.compact())
    assert types(result.events) == [
        "session",
        "compaction:started",
        "compaction:finished",
        "loop:done",
        "done",
    ]
    assert [m.content if isinstance(m, UserMessage) else m.text for m in session.messages] == [
        f"{SUMMARY_HEADER}\nsummary of a and b",
        "two",
        "b",
    ]
    assert compactability(session.history, Compaction(keep_last=2)) == "just_compacted"
    again = await drive(session.compact())
    assert "compaction:started" not in types(again.events)


async def test_a_compacted_session_resumes_from_the_log_without_compacting_again(tmp_path):
    from loopwright.runtime import open_session
    from loopwright.store import SessionKey, open_log
    from loopwright.store.export import export_traces

    log = await open_log(tmp_path / "db.sqlite")
    first = await open_session(agent(), log, "s")
    await drive(first.run("read all pages"))
    await log.close()
    log = await open_log(tmp_path / "db.sqlite")  # a restart
    again = await open_session(agent(), log, "s")
    assert again.messages == first.messages
    model_requests = []

    def count(request):
        model_requests.append(request)
        return Reply(text="still here", usage=Usage(input_tokens=50, output_tokens=2))

    again.agent = Agent(
        model=FunctionModel(count),
        tools=[read_page],
        context_budget=900,
        compaction=Compaction(keep_last=4, at_ratio=0.8),
    )
    result = await drive(again.run("anything else?"))
    assert "compaction:started" not in types(result.events)
    assert model_requests[0].messages[0].content.startswith(SUMMARY_HEADER)
    key = SessionKey("default", again.agent.name, "s")
    traces = await export_traces(log, again.agent, key, tmp_path / "traces")
    compactions = sum(1 for e in await log.read(key) if e.event.type == "compaction:finished")
    assert len(traces) == compactions + 1
    last = json.loads(traces[-1].read_text())
    assert last[0]["content"].startswith(SUMMARY_HEADER)
    await log.close()


def test_nudges_when_the_context_fills_up():
    from loopwright.loop.budget import check_budget
    from loopwright.state.history import History

    history = History()
    history.append(UserMessage(content="x" * 3000))
    assert check_budget(history, 1000).action == "nudge"
    assert check_budget(history, 10_000).action == "ok"
    assert check_budget(history, 700).action == "over_hard_limit"


messages = st.lists(st.sampled_from(["user", "call", "text"]), max_size=30)


@given(shape=messages, keep=st.integers(0, 10))
def test_the_split_never_separates_a_call_from_its_result(shape, keep):
    history = []
    for i, kind in enumerate(shape):
        if kind == "user":
            history.append(UserMessage(content="u"))
        elif kind == "text":
            history.append(AssistantMessage())
        else:
            calls = (
                ToolCall(id=f"a{i}", name="t", args={}),
                ToolCall(id=f"b{i}", name="t", args={}),
            )
            history.append(AssistantMessage(parts=calls))
            history += [ToolResultMessage(call_id=c.id, tool="t", content="r") for c in calls]
    cut = split_point(history, keep)
    assert 0 <= cut <= len(history)
    assert cut in (0, len(history)) or not isinstance(history[cut], ToolResultMessage)
    assert len(history) - cut >= min(keep, len(history))
