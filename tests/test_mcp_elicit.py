"""An MCP server's elicitation that nobody can answer live: the call pauses on it as a question
of the run (an item like `ask_user`'s); once it is answered, the call runs again from the start
and the server's question is answered from the log. Through a session in memory, with the
reference server (it elicits while its call runs; over stdio, and over streamable HTTP) and a
server of the `mcp` SDK (mcp_elicit_server.py: it answers the call with its questions,
SEP-2322). Through the HTTP server: test_mcp_elicit_http.py."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, scripted
from loopwright import DEFER, Agent, Answer, Session
from loopwright.approvals import QuestionRequest
from loopwright.mcp import MCPServer, StdioServer
from loopwright.testing import types
from loopwright.tools import NeedsAnswer, ToolReturn
from mcp_servers import EVERYTHING, context, everything_http, node, tools_of

TRIGGER = "mcp__everything__trigger-elicitation-request"
ASKED = "The MCP server 'everything' asks: Please provide inputs for the following fields:\n"
PAUSED = [
    "tool:started",
    "question:pending",
    "pending:requested",
    "tool:suspended",
    "step:finished",
    "loop:paused",
    "done",
]
RERUN = ["session", "question:resolved", "actauth:decision", "tool:started"]
COLOUR = "The MCP server 'asker' asks: Which colour?\n- colour (string): A colour"


def after_start(events: list[Any]) -> list[str]:
    names = types(events)
    return names[names.index("tool:started") :]


def outputs(events: list[Any]) -> list[Any]:
    return [e.content for e in events if e.type == "tool:output"]


def asker() -> StdioServer:
    here = Path(__file__).with_name("mcp_elicit_server.py")
    return StdioServer(name="asker", command=sys.executable, args=(str(here),))


def count_question(colour: str) -> str:
    return f"The MCP server 'asker' asks: How many ({colour})?\n- count (integer): How many"


async def test_the_call_pauses_on_the_servers_question_and_runs_again_with_the_answer(
    tmp_path: Path, started: list[MCPServer]
) -> None:
    """No approver: the run pauses on the question (the server told `cancel` after its call
    was cancelled); answered, the call runs again and the server gets `accept` with the answer.
    What the server received is read from its stdin, which goes through `tee`."""
    wire = tmp_path / "to-server.jsonl"
    config = StdioServer(
        name="everything",
        command="sh",
        args=("-c", 'tee "$0" | exec "$1" "$2" stdio', str(wire), node(), str(EVERYTHING)),
    )
    started.append(server := MCPServer(config))
    model = scripted({"tool_calls": [call(TRIGGER, "c1")]}, "thanks")
    session = Session(Agent(model=model, tools=[server]))
    paused = await drive(session.run("sign me up"))
    assert (paused.stop_reason, after_start(paused.events)) == ("paused", PAUSED)
    [question] = session.pending
    assert isinstance(question, QuestionRequest)
    assert question.question.startswith(ASKED + "- name (string): Your full, legal name\n")
    assert question.question.endswith("\nAnswer with a JSON object of these fields.")
    assert (question.call.id, question.call.name, question.options) == ("c1", TRIGGER, None)
    asked = next(e for e in paused.events if e.type == "question:pending")
    assert (asked.id, asked.question) == (question.id, question.question)

    answer = Answer(text='{"name": "Ada Lovelace", "check": true}', by="ana")
    assert (await session.resolve(question.id, answer)).outstanding == 0
    resumed = await drive(session.resume())
    assert types(resumed.events)[:4] == RERUN
    assert resumed.text == "thanks" and session.pending == []
    [shown] = outputs(resumed.events)
    assert shown.startswith(
        "✅ User provided the requested information!\n\nUser inputs:\n- Name: Ada Lovelace\n"
        "- Agreed to terms: true\n"
    )
    sent = [json.loads(line) for line in wire.read_text().splitlines()]
    calls = [m["id"] for m in sent if m.get("method") == "tools/call"]
    assert len(calls) == 2  # the call, then the call again
    told = [
        ("cancelled", m["params"]["requestId"])
        if m.get("method") == "notifications/cancelled"
        else m["result"]["action"]
        for m in sent
        if m.get("method") == "notifications/cancelled" or "result" in m
    ]
    assert told == [("cancelled", calls[0]), "cancel", "accept"]
    [accepted] = [m["result"] for m in sent if m.get("result", {}).get("action") == "accept"]
    assert accepted["content"]["name"] == "Ada Lovelace"
    assert accepted["content"]["integer"] == 42  # the form's default


async def test_two_questions_of_one_call_are_both_answered_on_its_third_run(
    started: list[MCPServer],
) -> None:
    """A call that asks a colour, then a count: it pauses on each in turn, and its third run
    has both answers (the server's SDK asks them as results of the call, SEP-2322)."""
    started.append(server := MCPServer(asker()))
    model = scripted({"tool_calls": [call("mcp__asker__ask_twice", "c1")]}, "done")
    session = Session(Agent(model=model, tools=[server]))
    await drive(session.run("go"))
    [colour] = session.pending
    assert (colour.question, colour.options) == (COLOUR, ["red", "blue"])
    await session.resolve(colour.id, Answer(text="blue"))
    again = await drive(session.resume())
    assert after_start(again.events) == [n for n in PAUSED if n != "step:finished"]
    [count] = session.pending
    assert (count.question, count.options, count.call.id) == (count_question("accept"), None, "c1")
    await session.resolve(count.id, Answer(text="3"))
    done = await drive(session.resume())
    assert done.text == "done"
    assert [json.loads(o) for o in outputs(done.events)] == [
        [
            {"action": "accept", "content": {"colour": "blue"}},
            {"action": "accept", "content": {"count": 3}},
        ]
    ]


async def test_an_answer_that_does_not_fit_the_form_is_declined(
    started: list[MCPServer], caplog: pytest.LogCaptureFixture
) -> None:
    """ "green" is none of the colours: the server is told `decline` (its next question says
    so), and the run goes on."""
    started.append(server := MCPServer(asker()))
    model = scripted({"tool_calls": [call("mcp__asker__ask_twice", "c1")]}, "done")
    session = Session(Agent(model=model, tools=[server]))
    await drive(session.run("go"))
    [colour] = session.pending
    await session.resolve(colour.id, Answer(text="green"))
    with caplog.at_level(logging.WARNING, "loopwright.tools"):
        await drive(session.resume())
    assert caplog.messages == ["MCP server 'asker': the answer does not fit its form; declined"]
    [count] = session.pending
    assert count.question == count_question("decline")
    await session.resolve(count.id, Answer(text="two"))  # not an integer: declined too
    done = await drive(session.resume())
    assert [json.loads(o) for o in outputs(done.events)] == [
        [{"action": "decline", "content": None}, {"action": "decline", "content": None}]
    ]


async def test_a_live_person_is_asked_and_the_run_does_not_pause(started: list[MCPServer]) -> None:
    started.append(server := MCPServer(asker()))
    model = scripted({"tool_calls": [call("mcp__asker__ask_name", "c1")]}, "done")
    asked: list[QuestionRequest] = []

    def person(request: Any) -> Answer:
        asked.append(request)
        return Answer(text="Ada")

    result = await drive(Session(Agent(model=model, tools=[server])).run("go", approver=person))
    assert result.text == "done" and "question:pending" not in types(result.events)
    assert [q.question for q in asked] == [
        "The MCP server 'asker' asks: What is your name?\n- name (string): Your name"
    ]
    assert [json.loads(o) for o in outputs(result.events)] == [
        {"action": "accept", "content": {"name": "Ada"}}
    ]


async def test_a_person_who_defers_leaves_the_question_pending(started: list[MCPServer]) -> None:
    started.append(server := MCPServer(asker()))
    model = scripted({"tool_calls": [call("mcp__asker__ask_name", "c1")]}, "done")
    session = Session(Agent(model=model, tools=[server]))
    paused = await drive(session.run("go", approver=lambda request: DEFER))
    assert (paused.stop_reason, after_start(paused.events)) == ("paused", PAUSED)
    [question] = session.pending
    await session.resolve(question.id, Answer(text="Ada"))
    done = await drive(session.resume())
    assert [json.loads(o) for o in outputs(done.events)] == [
        {"action": "accept", "content": {"name": "Ada"}}
    ]


async def test_over_streamable_http_the_call_pauses_and_runs_again(
    started: list[MCPServer],
) -> None:
    """The same with the reference server over streamable HTTP, calling the tool directly."""
    with everything_http() as config:
        tools = await tools_of(server := MCPServer(config))
        started.append(server)
        trigger = tools[TRIGGER]
        paused = await trigger.call({}, context())
        assert isinstance(paused, NeedsAnswer) and paused.question.startswith(ASKED)
        ctx = context()
        ctx.answers[paused.question] = '{"name": "Ada Lovelace", "check": true}'
        result = await trigger.call({}, ctx)
        assert isinstance(result, ToolReturn)
        assert result.content.startswith("✅ User provided the requested information!")
        assert await tools["mcp__everything__echo"].call({"message": "on"}, context()) == (
            ToolReturn(content="Echo: on")
        )
