"""Lone surrogates where text enters (issue 14, item 1): JSON's `"\\ud800"` in an HTTP request
body, a file name that is not UTF-8 in `list_files`, a provider's reply. Each is made valid at
that edge (`loopwright.state.text`: U+FFFD), so the run's events can be logged and the session goes on.
(A commit that fails anyway ends the run with `loop:error`: test_runtime_journal.py.)"""

from __future__ import annotations

import logging
import os

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, tool
from loopwright import events as ev
from loopwright.builtins import workspace_tools
from loopwright.messages import AssistantMessage, Text, ToolCall, UserMessage
from loopwright.models import ModelRequest
from loopwright.runtime import Settings
from loopwright.runtime.journal import session_in_log
from loopwright.state.text import REPLACEMENT, valid, valid_data
from loopwright.wire import dumps
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import KEY
from test_provider_anthropic import KEY_ENV, fake, model_at, reply, sse, text, tool_use
from test_provider_anthropic import collect as collect_anthropic
from test_provider_openai import KEY as OPENAI_KEY
from test_provider_openai import chat_sse, delta, ended, fake_model, responses_sse
from test_provider_openai import collect as collect_openai
from test_server import body, served

BAD = "bad \ud800 text"
MADE = f"bad {REPLACEMENT} text"

server = served("surrogates")


def test_valid_replaces_each_lone_surrogate_and_leaves_valid_text_as_it_is():
    assert REPLACEMENT == "\ufffd"
    assert valid(BAD) == MADE
    assert valid("\udcff\udcfe.txt") == "\ufffd\ufffd.txt"  # os.listdir's surrogateescape
    assert valid("\ud83d\ude00") == "😀"  # a pair kept as two code points is one character
    for fine in ("plain", "é😀", ""):
        assert valid(fine) is fine
    data = {"a": [1, "x"], "b": {"c": None}}
    assert valid_data(data) is data
    assert valid_data({"k\ud800": [BAD, 2, (BAD,)]}) == {f"k{REPLACEMENT}": [MADE, 2, (MADE,)]}
    completed = ev.MessageCompleted(message=AssistantMessage(parts=(Text(text=BAD),)))
    assert valid_data(completed).message.text == MADE


def test_a_lone_surrogate_in_a_request_body_is_replaced_and_the_session_goes_on(http):
    """Before: a 500 (the input could not be logged), and the session was unusable."""
    raw = {"content-type": "application/json"}
    escaped = b'{"message": "bad \\ud800 text", "sessionId": "sur-1"}'
    first = body(http.post("/agents/shop/messages", content=escaped, headers=raw), 200)
    assert first["text"] == f"heard: {MADE}"
    assert first["events"][1]["message"]["content"] == MADE
    encoded = '{"message": "raw \ud800 bytes", "sessionId": "sur-1"}'.encode(
        "utf-8", "surrogatepass"
    )
    second = body(http.post("/agents/shop/messages", content=encoded, headers=raw), 200)
    assert second["text"] == f"heard: {MADE} | raw {REPLACEMENT} bytes"
    third = body(
        http.post("/agents/shop/messages", json={"message": "hi", "sessionId": "sur-1"}), 200
    )
    assert third["text"] == f"heard: {MADE} | raw {REPLACEMENT} bytes | hi"
    logged = body(http.get("/agents/shop/sessions/sur-1/events"), 200)["events"]
    assert [e["event"]["type"] for e in logged].count("done") == 3


async def test_list_files_shows_a_name_that_is_not_utf8_with_a_replacement(tmp_path, logs):
    """Before: the result (a surrogateescape'd name) could not be logged and the run failed."""
    root = tmp_path / "ws"
    root.mkdir()
    os.close(os.open(bytes(root) + b"/caf\xe9-\xff.txt", os.O_CREAT | os.O_WRONLY, 0o600))
    (root / "fine.txt").write_text("fine\n")
    model = scripted({"tool_calls": [call("list_files", "l1")]}, "listed")
    agent = Agent(name="payer", model=model, tools=workspace_tools(root))
    session = await session_in_log(await logs(), agent, KEY, Settings())
    result = await drive(session.run("list"))
    assert result.stop_reason == "completed"
    [output] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert output.content == f"caf{REPLACEMENT}-{REPLACEMENT}.txt\nfine.txt"
    stored = [s.event for s in await session.journal.log.read(KEY)]
    assert [e for e in stored if isinstance(e, ev.ToolOutput)] == [output]


async def test_a_tools_result_or_error_with_lone_surrogates_is_made_valid(logs, monkeypatch):
    """Any tool's result (and the text of its exception) is made valid where it becomes the
    call's outcome: before, it failed the commit and the run ended with `loop:error`. (The
    operator's record of the exception is not captured here: its traceback holds the raw text,
    which pytest-xdist cannot send between processes.)"""
    monkeypatch.setattr(logging.getLogger("loopwright.tools"), "disabled", True)

    @tool
    def raw(n: int) -> str:
        """Returns undecodable text; raises it for n > 1."""
        if n > 1:
            raise RuntimeError(BAD)
        return BAD

    calls = [call("raw", "r1", n=1), call("raw", "r2", n=2)]
    model = scripted({"tool_calls": calls}, "seen")
    agent = Agent(name="payer", model=model, tools=[raw])
    session = await session_in_log(await logs(), agent, KEY, Settings())
    result = await drive(session.run("go"))
    assert result.stop_reason == "completed"
    outputs = [(e.content, e.is_error) for e in result.events if isinstance(e, ev.ToolOutput)]
    assert outputs == [(MADE, False), (f"Tool 'raw' failed: RuntimeError: {MADE}", True)]
    stored = [s.event for s in await session.journal.log.read(KEY)]
    assert [(e.content, e.is_error) for e in stored if isinstance(e, ev.ToolOutput)] == outputs


async def test_an_anthropic_reply_with_lone_surrogates_is_made_valid(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key")
    events = reply(text("bad \ud800", " text"), tool_use("clock", '{"tz": "\\ud800"}'))
    client, _ = fake(sse(*events))
    request = ModelRequest(system="s", messages=[UserMessage(content="hi")])
    items = await collect_anthropic(model_at("http://fake", http_client=client), request)
    for item in items:
        dumps(item)  # (raised before)
    assert [i.delta for i in items if isinstance(i, ev.TextDelta)] == [
        f"bad {REPLACEMENT}",
        " text",
    ]
    assert items[-1].message.parts == (
        Text(text=MADE),
        ToolCall(id="toolu_1", name="clock", args={"tz": REPLACEMENT}),
    )


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses"])
async def test_an_openai_reply_with_lone_surrogates_is_made_valid(monkeypatch, dialect):
    monkeypatch.setenv(OPENAI_KEY, "test-key")
    if dialect == "openai-chat":
        wire = chat_sse({"content": "bad \ud800"}, {"content": " text"}, finish="stop")
    else:
        parts = [delta("output_text", "bad \ud800"), delta("output_text", " text")]
        wire = responses_sse(*parts, ended("completed"))
    async with fake_model(dialect, [wire], []) as model:
        items = await collect_openai(model)
    for item in items:
        dumps(item)
    assert [i.delta for i in items if isinstance(i, ev.TextDelta)] == [
        f"bad {REPLACEMENT}",
        " text",
    ]
    assert items[-1].message.text == MADE
