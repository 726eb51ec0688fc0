"""A run's input and the state it starts from (issue 14, item 10): a run without input continues
only from a valid point, a `UserMessage` is an input like its text, and a history made from a
list owns a copy of it and counts its size."""

from __future__ import annotations

import pytest

from conftest import drive, scripted
from loopwright import Agent, Session
from loopwright.messages import (
    AssistantMessage,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_chars,
)
from loopwright.state.compaction import Compaction
from loopwright.state.history import History
from loopwright.testing import types

REPLY = ["text:delta", "message:completed"]
ANSWER = ["step:started", "budget:check", *REPLY, "step:finished", "loop:done", "done"]


def said(text: str) -> AssistantMessage:
    return AssistantMessage(parts=(Text(text=text),))


def lines(messages: list) -> list[tuple[str, str]]:
    """Who said what (a reply's usage and model left out)."""
    return [(m.role, m.text if isinstance(m, AssistantMessage) else m.content) for m in messages]


# ---- a run without input ---------------------------------------------------------------------


async def test_a_run_without_input_on_an_empty_history_is_refused():
    model = scripted("hello")
    session = Session(Agent(model=model))
    with pytest.raises(ValueError, match="nothing to continue from: its history is empty"):
        session.run()
    assert model.requests == [] and not session.busy and session.messages == []
    result = await drive(session.run("hi"))  # the session is as it was: an input runs
    assert types(result.events) == ["session", "input:received", *ANSWER]


async def test_a_run_without_input_after_a_reply_is_refused():
    model = scripted("first", "second")
    session = Session(Agent(model=model))
    await drive(session.run("hi"))
    with pytest.raises(ValueError, match="its history ends with a reply"):
        session.run(None)
    assert len(model.requests) == 1
    assert lines(session.messages) == [("user", "hi"), ("assistant", "first")]


async def test_a_run_without_input_continues_a_history_ending_in_a_user_message():
    model = scripted("answer")
    seeded = [UserMessage(content="one"), said("two"), UserMessage(content="three")]
    session = Session(Agent(model=model), history=History(messages=seeded))
    result = await drive(session.run())
    assert types(result.events) == ["session", *ANSWER]
    assert list(model.requests[0].messages) == seeded
    assert session.messages[:3] == seeded
    assert lines(session.messages[3:]) == [("assistant", "answer")]


async def test_a_run_without_input_continues_after_tool_results():
    model = scripted("done")
    call = ToolCall(id="c1", name="lookup", args={})
    seeded = [
        UserMessage(content="look"),
        AssistantMessage(parts=(call,), stop_reason="tool_use"),
        ToolResultMessage(call_id="c1", tool="lookup", content="found"),
    ]
    session = Session(Agent(model=model), history=History(messages=seeded))
    result = await drive(session.run())
    assert types(result.events) == ["session", *ANSWER]
    assert list(model.requests[0].messages) == seeded


async def test_steering_queued_after_a_reply_is_a_point_to_continue_from():
    model = scripted("first", "second")
    session = Session(Agent(model=model))
    await drive(session.run("hi"))
    session.steer("and then?")
    result = await drive(session.run())
    assert types(result.events) == ["session", "steering:injected", *ANSWER]
    assert lines(model.requests[1].messages) == [
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "and then?"),
    ]


async def test_a_follow_up_alone_is_no_point_to_continue_from():
    session = Session(Agent(model=scripted("first")))
    await drive(session.run("hi"))
    session.follow_up("later")
    with pytest.raises(ValueError, match="its history ends with a reply"):
        session.run()
    assert session.queued.follow_ups == ("later",)  # refused before anything was taken


# ---- a UserMessage as input ------------------------------------------------------------------


async def test_a_user_message_is_an_input_like_its_text():
    by_text, by_message = Session(Agent(model=scripted("ok"))), Session(Agent(model=scripted("ok")))
    plain = await drive(by_text.run("hello there"))
    message = await drive(by_message.run(UserMessage(content="hello there")))
    assert message.events[1:] == plain.events[1:]  # all but `session` (its id)
    assert by_message.messages == by_text.messages
    assert lines(by_message.messages) == [("user", "hello there"), ("assistant", "ok")]
    assert message.events[1].message == UserMessage(content="hello there")


@pytest.mark.parametrize("bad", [42, said("hi"), ["hi"]])
def test_an_input_that_is_neither_text_nor_a_user_message_is_a_type_error(bad):
    session = Session(Agent(model=scripted("ok")))
    with pytest.raises(TypeError, match="a run's input is a str or a UserMessage, not "):
        session.run(bad)
    assert not session.busy and session.messages == []


# ---- a history made from a list --------------------------------------------------------------


def test_a_history_copies_the_list_it_is_made_from():
    seeded = [UserMessage(content="one"), said("two")]
    history = History(messages=seeded)
    history.append(UserMessage(content="three"))
    assert seeded == [UserMessage(content="one"), said("two")]
    assert history.messages == [*seeded, UserMessage(content="three")]


def test_a_history_made_from_a_list_counts_its_size():
    seeded = [UserMessage(content="x" * 4488), said("y" * 4488)] * 4
    history = History(messages=seeded)
    assert history.chars == 8 * 4500 == sum(message_chars(m) for m in seeded)
    assert history.used_tokens() == 9000
    grown = History()
    for message in seeded:
        grown.append(message)
    assert grown.chars == history.chars  # counted as appending them would
    given = History(messages=seeded, chars=123)  # a size given (a snapshot's) is kept
    assert given.chars == 123


async def test_a_seeded_history_nudges_and_compacts_on_the_first_step():
    seeded = [UserMessage(content="x" * 4488), said("y" * 4488)] * 4  # 9,000 tokens
    model = scripted("short")
    agent = Agent(
        model=model, context_budget=10_000, compaction=Compaction(mode="discard", keep_last=2)
    )
    session = Session(agent, history=History(messages=seeded))
    result = await drive(session.run("go"))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "compaction:started",
        "compaction:finished",
        *REPLY,
        "step:finished",
        "loop:done",
        "done",
    ]
    check = result.events[3]
    assert (check.action, check.used_tokens, check.ratio) == ("nudge", 9003, 0.9003)
    finished = result.events[5]
    assert (finished.from_, finished.to, finished.dropped) == (9, 2, 7)
    assert list(model.requests[0].messages) == [said("y" * 4488), UserMessage(content="go")]
