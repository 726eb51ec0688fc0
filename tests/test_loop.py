"""The loop's core behaviour (SPEC §3): exact event sequences and what the model sees."""

from __future__ import annotations

import asyncio
import hashlib

from conftest import call, run_agent, scripted, verify
from loopwright import Agent, Session, ToolError, ToolReturn, tool
from loopwright.messages import ToolResultMessage
from loopwright.testing import types
from virtual_time import virtual


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise ValueError("boom")


def results_seen(model, request_index: int) -> list[ToolResultMessage]:
    return [m for m in model.requests[request_index].messages if isinstance(m, ToolResultMessage)]


async def test_text_reply_finishes():
    model = scripted("Hello!")
    result = await run_agent(Agent(model=model))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    assert (result.text, result.stop_reason) == ("Hello!", "completed")
    model.assert_exhausted()


async def test_one_tool_then_answer():
    model = scripted({"tool_calls": [call("add", a=1, b=2)]}, "3")
    result = await run_agent(Agent(model=model, tools=[add]))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "message:completed",
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
        "step:finished",
        "step:started",
        "budget:check",
        "text:delta",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    assert results_seen(model, 1) == [ToolResultMessage(call_id="add_1", tool="add", content="3")]


async def test_max_turns_allows_exactly_n_requests():
    model = scripted(*[{"tool_calls": [call("add", id=f"c{i}", a=i, b=0)]} for i in range(3)])
    result = await run_agent(Agent(model=model, tools=[add], max_turns=3))
    assert len(model.requests) == 3
    assert types(result.events)[-2:] == ["loop:max_turns", "done"]
    assert result.events[-2].max_turns == 3
    assert result.stop_reason == "max_turns"
    assert types(result.events).count("tool:started") == 3


async def test_batch_runs_concurrently_and_results_keep_call_order():
    started: list[str] = []
    both, second_out = asyncio.Event(), asyncio.Event()

    @tool
    async def slow(label: str) -> str:
        """Waits for its sibling to start; the first also waits for the second's output."""
        started.append(label)
        if len(started) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 60)  # (a safety net: run one at a time, it fails)
        if label == "first":
            await asyncio.wait_for(second_out.wait(), 60)
        return label

    model = scripted(
        {"tool_calls": [call("slow", "s1", label="first"), call("slow", "s2", label="second")]},
        "ok",
    )
    events = []
    async for event in Session(Agent(model=model, tools=[slow])).run("go"):
        events.append(event)
        if event.type == "tool:output" and event.id == "s2":
            second_out.set()
    verify(events)
    outputs = [e.id for e in events if e.type == "tool:output"]
    assert outputs == ["s2", "s1"]  # finished out of order...
    assert [m.call_id for m in results_seen(model, 1)] == ["s1", "s2"]  # ...appended in order


async def test_a_sequential_tool_makes_the_batch_sequential():
    log: list[str] = []

    @tool
    async def step(label: str) -> str:
        """Record start and end."""
        log.append(f"start {label}")
        for _ in range(5):  # yield to the loop: a call running beside this one would go on
            await asyncio.sleep(0)
        log.append(f"end {label}")
        return label

    @tool(sequential=True)
    async def exclusive() -> str:
        """Must run alone."""
        log.append("exclusive")
        return "x"

    model = scripted(
        {
            "tool_calls": [
                call("step", "1", label="a"),
                call("exclusive", "2"),
                call("step", "3", label="b"),
            ]
        },
        "ok",
    )
    result = await run_agent(Agent(model=model, tools=[step, exclusive]))
    assert log == ["start a", "end a", "exclusive", "start b", "end b"]
    started = [e.id for e in result.events if e.type == "tool:started"]
    assert started == ["1", "2", "3"]


async def test_unknown_tool_is_an_error_result():
    model = scripted({"tool_calls": [call("nope")]}, "sorry")
    result = await run_agent(Agent(model=model, tools=[add]))
    assert "actauth:decision" not in types(result.events)
    assert results_seen(model, 1) == [
        ToolResultMessage(
            call_id="nope_1",
            tool="nope",
            content="Unknown tool 'nope'. Available tools: add.",
            is_error=True,
        )
    ]
    assert result.stop_reason == "completed"


async def test_invalid_arguments_carry_validation_details():
    model = scripted({"tool_calls": [call("add", a="x", c=1)]}, "sorry")
    await run_agent(Agent(model=model, tools=[add]))
    [seen] = results_seen(model, 1)
    assert seen.is_error
    assert seen.content == (
        "Invalid arguments for tool 'add': a: Input should be a valid integer, unable to parse "
        "string as an integer; b: Field required; c: Extra inputs are not permitted"
    )


async def test_raising_tool_is_an_error_result():
    model = scripted({"tool_calls": [call("boom")]}, "it failed")
    result = await run_agent(Agent(model=model, tools=[boom]))
    assert results_seen(model, 1)[0].content == "Tool 'boom' failed: ValueError: boom"
    statuses = [e.status_text for e in result.events if e.type == "tool:result"]
    assert statuses == ["Error."]


async def test_tool_error_gives_a_clean_message():
    @tool
    def picky(order_id: str) -> str:
        """Look up an order."""
        raise ToolError(f"No order {order_id}.")

    model = scripted({"tool_calls": [call("picky", order_id="Z")]}, "none")
    await run_agent(Agent(model=model, tools=[picky]))
    assert results_seen(model, 1)[0].content == "No order Z."


@virtual
async def test_timed_out_tool_is_an_error_result():
    @tool(timeout=0.05)
    async def hang() -> str:
        """Returns an hour later (on virtual time: at once, were there no timeout)."""
        await asyncio.sleep(3600)
        return "late"

    model = scripted({"tool_calls": [call("hang")]}, "gave up")
    result = await run_agent(Agent(model=model, tools=[hang]))
    assert results_seen(model, 1)[0].content == "Tool 'hang' timed out after 0.05s."
    assert result.stop_reason == "completed"


@virtual
async def test_agent_default_timeout_applies():
    @tool
    async def hang() -> str:
        """Returns an hour later (on virtual time: at once, were there no timeout)."""
        await asyncio.sleep(3600)
        return "late"

    model = scripted({"tool_calls": [call("hang")]}, "gave up")
    await run_agent(Agent(model=model, tools=[hang], tool_timeout=0.02))
    assert results_seen(model, 1)[0].content == "Tool 'hang' timed out after 0.02s."


async def test_oversized_output_is_a_preview_naming_the_whole():
    """(docs/large-results.md; tests/test_large_results.py drives the store and `read_result`)"""

    @tool(max_output=10)
    def big() -> str:
        """Too much."""
        return "a" * 20 + "z" * 5

    model = scripted({"tool_calls": [call("big")]}, "ok")
    await run_agent(Agent(model=model, tools=[big]))
    [seen] = results_seen(model, 1)
    ref = "result:" + hashlib.sha256(b"a" * 20 + b"z" * 5).hexdigest()
    assert not seen.is_error
    assert seen.content == (
        f"[Tool 'big' returned 25 characters, over its limit of 10: the whole result is stored "
        f"as {ref}. Below: its first 7 and last 3 characters. Read any range with "
        "read_result(ref, offset, length).]\naaaaaaa\n[… 15 characters not shown …]\nzzz"
    )


async def test_an_output_cut_never_keeps_part_of_a_secret():
    """A cut through a key would keep most of it where redaction no longer finds it: the cut
    comes before the key instead (P11)."""
    key = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

    @tool(max_output=30)
    def big() -> str:
        """Too much."""
        return "token: " + key + " and more"

    model = scripted({"tool_calls": [call("big")]}, "ok")
    await run_agent(Agent(model=model, tools=[big]))
    [seen] = results_seen(model, 1)
    preview = seen.content.split("\n", 1)[1]  # (below its note: the head and the tail)
    assert preview == "token: \n[… 41 characters not shown …]\nand more"


async def test_a_tail_cut_never_keeps_part_of_a_secret():
    key = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

    @tool(max_output=40)
    def big() -> str:
        """Too much."""
        return "x" * 60 + " " + key + " end"

    model = scripted({"tool_calls": [call("big")]}, "ok")
    await run_agent(Agent(model=model, tools=[big]))
    [seen] = results_seen(model, 1)
    assert seen.content.split("\n", 1)[1] == "x" * 30 + "\n[… 71 characters not shown …]\n end"


async def test_reply_cut_by_output_limit_never_runs_its_tools():
    ran = []

    @tool
    def effect() -> str:
        """Has a side effect."""
        ran.append(1)
        return "done"

    model = scripted({"tool_calls": [call("effect")], "stop_reason": "max_tokens"}, "retrying")
    result = await run_agent(Agent(model=model, tools=[effect]))
    assert ran == []
    assert "tool:started" not in types(result.events)
    assert results_seen(model, 1)[0].content.startswith("Not run: the reply was cut off")
    assert result.stop_reason == "completed"


async def test_terminate_hint_stops_after_the_batch():
    @tool
    def finish(answer: str) -> ToolReturn:
        """Give the final answer."""
        return ToolReturn(content=answer, terminate=True)

    model = scripted({"tool_calls": [call("finish", answer="42")]})
    result = await run_agent(Agent(model=model, tools=[finish]))
    assert types(result.events)[-3:] == ["step:finished", "loop:terminated", "done"]
    assert (result.text, result.stop_reason) == ("42", "terminated")


async def test_tool_progress_streams_as_updates():
    from loopwright import ToolContext

    @tool
    async def work(ctx: ToolContext) -> str:
        """Long work."""
        ctx.progress("half", 0.5)
        await asyncio.sleep(0)
        ctx.progress("all", 1.0)
        return f"done in {ctx.session_id}"

    assert "ctx" not in work.parameters["properties"]
    model = scripted({"tool_calls": [call("work")]}, "ok")
    session = Session(Agent(model=model, tools=[work]), session_id="s-1")
    result = await run_agent_session(session)
    updates = [(e.message, e.progress) for e in result.events if e.type == "tool:update"]
    assert updates == [("half", 0.5), ("all", 1.0)]
    assert results_seen(model, 1)[0].content == "done in s-1"


async def run_agent_session(session: Session):
    from conftest import drive

    return await drive(session.run("go"))


async def test_retryable_model_failure_is_retried():
    model = scripted(
        {"fail": {"error": "rate limited", "retryable": True, "retry_after": 0.01}}, "fine"
    )
    result = await run_agent(Agent(model=model))
    assert types(result.events)[3:8] == [
        "budget:check",
        "model:retry",
        "text:delta",
        "message:completed",
        "step:finished",
    ]
    retry = result.events[4]
    assert (retry.attempt, retry.error, retry.delay) == (1, "rate limited", 0.01)
    assert result.text == "fine"


async def test_retries_are_bounded_then_the_run_errors():
    failure = {"fail": {"error": "overloaded", "retryable": True, "retry_after": 0.001}}
    model = scripted(failure, failure, failure, "never")
    result = await run_agent(Agent(model=model))
    assert types(result.events).count("model:retry") == 2
    assert types(result.events)[-2:] == ["loop:error", "done"]
    assert result.events[-2].error == "model request failed: overloaded"
    assert model.unused == 1


async def test_a_runs_retries_share_one_budget():
    """Each request may retry twice, but the run may retry three times in all: the fourth
    failure, in the second step, ends the run although that request retried only once."""
    from loopwright import RetryPolicy

    failure = {"fail": {"error": "overloaded", "retryable": True, "retry_after": 0.001}}
    model = scripted(
        failure,
        failure,
        {"tool_calls": [call("add", "e", a=1, b=2)]},
        failure,
        failure,
        "never",
    )
    agent = Agent(model=model, tools=[add], retry=RetryPolicy(attempts=2, budget=3))
    result = await run_agent(agent)
    retries = [e for e in result.events if e.type == "model:retry"]
    assert [(r.attempt, r.error) for r in retries] == [
        (1, "overloaded"),
        (2, "overloaded"),
        (1, "overloaded"),
    ]
    assert [e.type for e in result.events[-2:]] == ["loop:error", "done"]
    assert result.events[-2].error == (
        "model request failed: overloaded (the run's retry budget is spent)"
    )
    assert model.unused == 1


async def test_partial_output_rides_into_the_retry():
    model = scripted(
        {
            "fail": {
                "error": "cut",
                "retryable": True,
                "retry_after": 0.001,
                "after_text": "Half an ans",
            }
        },
        "Half an answer.",
    )
    await run_agent(Agent(model=model))
    assert model.requests[1].notes == ("[Your previous attempt was cut off after: Half an ans]",)


async def test_non_retryable_failure_ends_with_error():
    model = scripted({"fail": "bad request"})
    result = await run_agent(Agent(model=model))
    assert len(model.requests) == 1
    assert (result.stop_reason, result.text) == (
        "error",
        "Error: model request failed: bad request",
    )


async def test_budget_nudge_goes_into_the_request_only():
    model = scripted("ok")
    result = await run_agent(Agent(model=model, context_budget=10), "x" * 40)
    check = result.events[3]
    assert (check.type, check.action) == ("budget:check", "over_hard_limit")
    model2 = scripted("ok")
    result2 = await run_agent(Agent(model=model2, context_budget=20), "y" * 48)
    assert result2.events[3].action == "nudge"
    assert model2.requests[0].notes == (result2.events[3].nudge.content,)
    assert all(m.role != "system" for m in model2.requests[0].messages)


async def test_a_tool_can_stream_events_as_part_of_its_call():
    from loopwright import ToolContext
    from loopwright.events import SkillLoaded

    @tool
    async def loader(ctx: ToolContext) -> str:
        """Loads something."""
        ctx.emit(SkillLoaded(skill="deploy"))
        return "loaded"

    model = scripted({"tool_calls": [call("loader")]}, "ok")
    result = await run_agent(Agent(model=model, tools=[loader]))
    names = types(result.events)
    assert names[names.index("tool:started") : names.index("tool:started") + 3] == [
        "tool:started",
        "skill:loaded",
        "toollane:result",
    ]
