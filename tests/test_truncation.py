"""A reply cut by the output limit without tool calls: a `message:truncated` event, the stop
reason `max_tokens` of a run that ends with it (v1 still sees `completed`), and
`continue_truncated` asking the model to go on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from conftest import drive, run_agent, verify
from loopwright import Agent, Session
from loopwright import events as ev
from loopwright.loop.finish import CONTINUE
from loopwright.loop.result import RunResult
from loopwright.messages import AssistantMessage, UserMessage
from loopwright.runtime import Runtime
from loopwright.state.replay import fold
from loopwright.store.log import SessionKey
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.testing import ScriptedModel, types
from loopwright.wire import to_dict


def model(*replies: Any) -> ScriptedModel:
    return ScriptedModel.from_script(list(replies))


def cut(text: str) -> dict[str, Any]:
    return {"text": text, "stop_reason": "max_tokens", "chunk": 100}


async def test_a_cut_reply_ends_the_run_with_stop_reason_max_tokens():
    result = await run_agent(Agent(model=model(cut("The answer is"))))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "text:delta",
        "message:completed",
        "step:finished",
        "message:truncated",
        "loop:done",
        "done",
    ]
    assert result.events[-3:] == [
        ev.MessageTruncated(detail="max_tokens"),
        ev.LoopDone(text="The answer is"),
        ev.Done(text="The answer is", stop_reason="max_tokens"),
    ]
    assert result == RunResult(
        text="The answer is",
        stop_reason="max_tokens",
        events=result.events,
        session_id=result.session_id,
    )
    assert result.stop_detail == "max_tokens"  # (deprecated, kept for older callers)
    assert to_dict(result.events[-1]) == {
        "type": "done",
        "text": "The answer is",
        "stopReason": "max_tokens",
    }
    # v1 clients see what they always saw: the event is left out, `done` as for `completed`
    assert to_dict(result.events[-3], "v1") is None
    assert to_dict(result.events[-1], "v1") == {"text": "The answer is", "type": "done"}


async def test_continue_truncated_asks_the_model_to_go_on_and_joins_the_text():
    scripted = model(cut("The answer "), cut("is forty"), "-two.")
    session = Session(Agent(model=scripted, continue_truncated=2))
    result = await drive(session.run("go"))
    assert types(result.events) == [
        "session",
        "input:received",
        *("step:started", "budget:check", "text:delta", "message:completed", "step:finished"),
        "message:truncated",
        *("step:started", "budget:check", "text:delta", "message:completed", "step:finished"),
        "message:truncated",
        *("step:started", "budget:check", "text:delta", "message:completed", "step:finished"),
        "loop:done",
        "done",
    ]
    note = UserMessage(content=CONTINUE)
    truncated = [e for e in result.events if isinstance(e, ev.MessageTruncated)]
    assert truncated == [ev.MessageTruncated(detail="max_tokens", message=note)] * 2
    assert result.text == "The answer is forty-two."
    assert result.events[-2:] == [
        ev.LoopDone(text="The answer is forty-two."),
        ev.Done(text="The answer is forty-two.", stop_reason="completed"),
    ]
    assert result.stop_detail is None
    # the history holds each piece and the notes between them; the log rebuilds it
    shown = [
        (m.role, m.content if isinstance(m, UserMessage) else m.text)
        for m in session.history.messages
    ]
    assert shown == [
        ("user", "go"),
        ("assistant", "The answer "),
        ("user", CONTINUE),
        ("assistant", "is forty"),
        ("user", CONTINUE),
        ("assistant", "-two."),
    ]
    assert fold(result.events, {}).history.messages == session.history.messages
    assert scripted.requests[1].messages[-1] == note


async def test_past_the_bound_the_cut_text_so_far_ends_the_run():
    scripted = model(cut("one "), cut("two "), "never asked")
    result = await run_agent(Agent(model=scripted, continue_truncated=1))
    assert [e.message is not None for e in result.events if isinstance(e, ev.MessageTruncated)] == [
        True,
        False,
    ]
    assert (result.text, result.stop_reason) == ("one two ", "max_tokens")
    assert scripted.unused == 1


async def test_a_cut_reply_with_tool_calls_is_not_continued():
    """Its calls get an error result (they may be incomplete) and the model answers that."""
    scripted = model(
        {"text": "Let me", "tool_calls": [{"name": "x", "args": {}}], "stop_reason": "max_tokens"},
        "Done.",
    )
    result = await run_agent(Agent(model=scripted, continue_truncated=3))
    assert "message:truncated" not in types(result.events)
    assert (result.text, result.stop_reason) == ("Done.", "completed")
    [cut_call] = [e for e in result.events if isinstance(e, ev.ToolResult)]
    assert (cut_call.tool, cut_call.status_text) == ("x", "Error.")


async def test_a_cut_structured_answer_that_fits_keeps_its_output():
    """Cut JSON that still parses and fits: the run ends `max_tokens`, with its output."""
    result = await run_agent(Agent(model=model(cut('{"value": 4}')), output_type=Answer))
    assert (result.text, result.stop_reason) == ('{"value":4}', "max_tokens")
    assert result.output == Answer(value=4)


async def test_a_cut_answer_ends_max_tokens_in_the_durable_log(tmp_path: Path):
    """On a real SQLite file: the stored `done` says `max_tokens` (read back by a new log on
    the same file), and the session is idle like after any answer."""
    key = SessionKey("acme", "cutter", "s1")
    log = SQLiteLog(tmp_path / "loopwright.db")
    runtime = Runtime({"cutter": Agent(name="cutter", model=model(cut("The answer is")))}, log)
    try:
        live = await runtime.send("acme", "cutter", "s1", "go")
        done = await live.wait()
        verify(live.items)
        assert done == ev.Done(text="The answer is", stop_reason="max_tokens")
        assert (await runtime.session(key)).status == "idle"
    finally:
        await runtime.close()
        await log.close()
    again = SQLiteLog(tmp_path / "loopwright.db")
    try:
        stored = [s.event for s in await again.read(key)]
    finally:
        await again.close()
    assert types(stored) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "message:truncated",
        "loop:done",
        "done",
    ]
    assert stored[-3:] == [
        ev.MessageTruncated(detail="max_tokens"),
        ev.LoopDone(text="The answer is"),
        ev.Done(text="The answer is", stop_reason="max_tokens"),
    ]


class Answer(BaseModel):
    value: int


async def test_a_cut_structured_answer_is_continued_then_checked_whole():
    scripted = model(cut('{"val'), 'ue": 42}')
    result = await run_agent(Agent(model=scripted, output_type=Answer, continue_truncated=1))
    assert result.output == Answer(value=42)
    assert "output:invalid" not in types(result.events)
    last = [e for e in result.events if isinstance(e, ev.MessageCompleted)][-1]
    assert isinstance(last.message, AssistantMessage) and last.message.text == 'ue": 42}'


async def test_sessions_show_tells_the_cut_and_the_wrong_answer():
    from loopwright.cli.sessions import conversation

    scripted = model(cut('{"val'), '{"value": "x"}', '{"value": 1}')
    result = await run_agent(Agent(model=scripted, output_type=Answer, continue_truncated=0))
    assert conversation(result.events) == [
        "user: go",
        "  (cut by the output limit)",
        "  ✗ the answer does not fit the output schema: the answer is not JSON "
        "(Unterminated string starting at: line 1 column 2 (char 1))",
        "  ✗ the answer does not fit the output schema: value: Input should be a valid "
        "integer, unable to parse string as an integer",
        'assistant: {"value":1}',
        "-- run completed",
    ]
