"""Bad replies are data (issue 11, point 7): a reply with two calls under one id, a call with no
id, a tool name that is not a string or arguments that are not an object never crash a run.
Each such call gets an error result the model reads (it never runs), renamed the same way in the
events, the history the model is sent next and the log; the run ends with `done`, never with
`loop:error`. The event checker accepts a call id used again in a later step, and still rejects
a reply that holds an id twice or an id reused while its call is open."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseOutputItemAddedEvent

from conftest import assert_history_valid, call, drive, run_agent, scripted
from loopwright import Agent, Session, tool
from loopwright import events as ev
from loopwright.loop.replies import INVALID_NAME, check_reply
from loopwright.messages import (
    AssistantMessage,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from loopwright.models import ModelRequest
from loopwright.providers._openai_common import ReplyParts
from loopwright.providers.anthropic import _Reply
from loopwright.providers.openai_chat import _ChatReader as ChatReader
from loopwright.providers.openai_responses import _ResponsesReader as ResponsesReader
from loopwright.runtime import open_session
from loopwright.store import open_log
from loopwright.testing import FunctionModel, Reply, check_events, types

ran: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    ran.append((a, b))
    return a + b


@pytest.fixture(autouse=True)
def fresh() -> None:
    ran.clear()


def trail(events: list[ev.Event]) -> list[tuple[str, str]]:
    """(type, call id) of every event about one call."""
    return [(e.type, e.id) for e in events if e.type.startswith("tool:") and e.type != "tool:delta"]


def sent(request: ModelRequest) -> list[Any]:
    return list(request.messages)


DUPLICATE = (
    "Not run: its id 'call_1' was already used by an earlier call of the same reply (call ids "
    "must be unique). Send the call again if you meant it."
)


async def test_two_calls_with_one_id_both_get_a_result_and_the_run_ends_with_done():
    # before: KeyError 'call_1' out of Session.run, no loop:error, no done
    model = scripted(
        {"tool_calls": [call("add", id="call_1", a=1, b=2), call("add", id="call_1", a=3, b=4)]},
        "3",
    )
    result = await run_agent(Agent(model=model, tools=[add]))
    assert types(result.events) == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "tool:delta",
        "tool:delta",
        "message:completed",
        "actauth:decision",
        "tool:output",
        "tool:result",
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
    assert trail(result.events) == [
        ("tool:output", "call_1-2"),
        ("tool:result", "call_1-2"),
        ("tool:started", "call_1"),
        ("tool:output", "call_1"),
        ("tool:result", "call_1"),
    ]
    assert (result.stop_reason, ran) == ("completed", [(1, 2)])  # the second never ran
    completed = result.events[6]
    assert isinstance(completed, ev.MessageCompleted)
    assert completed.message.tool_calls == [
        ToolCall(id="call_1", name="add", args={"a": 1, "b": 2}),
        ToolCall(id="call_1-2", name="add", args={"a": 3, "b": 4}),
    ]
    # what the model is sent next: the renamed reply, each call answered once, in call order
    messages = sent(model.requests[1])
    assert messages == [
        UserMessage(content="go"),
        completed.message,
        ToolResultMessage(call_id="call_1", tool="add", content="3"),
        ToolResultMessage(call_id="call_1-2", tool="add", content=DUPLICATE, is_error=True),
    ]
    assert_history_valid(messages)


async def test_a_call_with_no_id_gets_a_fresh_one_that_no_other_call_holds():
    def reply(request: ModelRequest) -> Reply | str:
        if len(request.messages) > 1:
            return "ok"
        calls = (
            ToolCall(id="", name="add", args={"a": 1, "b": 1}),
            ToolCall(id="call_0", name="add", args={"a": 2, "b": 2}),
        )
        return Reply(tool_calls=calls)

    requests: list[ModelRequest] = []
    model = FunctionModel(lambda r: requests.append(r) or reply(r))
    result = await run_agent(Agent(model=model, tools=[add]))
    assert trail(result.events) == [
        ("tool:output", "call_0-2"),
        ("tool:result", "call_0-2"),
        ("tool:started", "call_0"),
        ("tool:output", "call_0"),
        ("tool:result", "call_0"),
    ]
    assert (result.stop_reason, ran) == ("completed", [(2, 2)])
    messages = sent(requests[1])
    assert [c.id for c in messages[1].tool_calls] == ["call_0-2", "call_0"]
    assert messages[2].content == (
        "Not run: the call had no id (got ''). Send the call again if you meant it."
    )
    assert_history_valid(messages)


@dataclass
class Wire:
    """A model that hands the loop each reply as a provider's reader assembled it, with no
    deltas: what came off the wire, bad names and all."""

    replies: list[AssistantMessage]
    name: str = "wire:test"
    requests: list[ModelRequest] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(replace(request, messages=tuple(request.messages)))
        yield ev.MessageCompleted(message=self.replies[len(self.requests) - 1])


async def test_a_name_that_is_not_a_string_and_arguments_that_are_no_object_are_errors():
    bad = AssistantMessage(
        parts=(
            Text(text="Let me add."),
            ToolCall(id="c1", name=42, args={}),  # type: ignore[arg-type]
            ToolCall(id="c2", name="", args={"a": 1, "b": 2}),
            ToolCall(id="c3", name="add", args=[1, 2]),  # type: ignore[arg-type]
            ToolCall(id="c4", name="add", args={"a": 5, "b": 5}),
        ),
        stop_reason="tool_use",
    )
    model = Wire([bad, AssistantMessage(parts=(Text(text="10"),))])
    result = await run_agent(Agent(model=model, tools=[add]))
    assert [(e.type, getattr(e, "tool", None)) for e in result.events[4:17]] == [
        ("message:completed", None),
        ("assistant:text", None),
        ("tool:output", INVALID_NAME),
        ("tool:result", INVALID_NAME),
        ("tool:output", INVALID_NAME),
        ("tool:result", INVALID_NAME),
        ("tool:output", "add"),
        ("tool:result", "add"),
        ("actauth:decision", "add"),
        ("tool:started", "add"),
        ("toollane:result", None),
        ("tool:output", "add"),
        ("tool:result", "add"),
    ]
    assert (result.stop_reason, ran) == ("completed", [(5, 5)])
    messages = sent(model.requests[1])
    assert messages[1].tool_calls == [
        ToolCall(id="c1", name=INVALID_NAME, args={}),
        ToolCall(id="c2", name=INVALID_NAME, args={"a": 1, "b": 2}),
        ToolCall(id="c3", name="add", args={}),
        ToolCall(id="c4", name="add", args={"a": 5, "b": 5}),
    ]
    assert [m.content for m in messages[2:5]] == [
        "Not run: the tool name must be a non-empty string (got 42). "
        "Send the call again if you meant it.",
        "Not run: the tool name must be a non-empty string (got ''). "
        "Send the call again if you meant it.",
        "Not run: the arguments must be a JSON object (got [1, 2]). "
        "Send the call again if you meant it.",
    ]
    assert messages[5] == ToolResultMessage(call_id="c4", tool="add", content="10")
    assert_history_valid(messages)


async def test_the_log_rebuilds_the_renamed_history(tmp_path):
    log = await open_log(tmp_path / "loopwright.db")
    try:
        model = scripted(
            {"tool_calls": [call("add", id="x", a=1, b=2), call("add", id="x", a=3, b=4)]}, "3"
        )
        agent = Agent(model=model, tools=[add])
        session = await open_session(agent, log, "s1")
        result = await drive(session.run("go"))
        assert result.stop_reason == "completed"
        again = await open_session(agent, log, "s1")
        assert again.history.messages == session.history.messages
        assert [c.id for c in again.history.messages[1].tool_calls] == ["x", "x-2"]
        assert_history_valid(again.history.messages)
    finally:
        await log.close()


async def test_an_id_used_again_in_a_later_step_is_fine():
    # the OpenAI dialect falls back to call_<index>: step 2 may say call_0 again
    model = scripted(
        {"tool_calls": [call("add", id="call_0", a=1, b=2)]},
        {"tool_calls": [call("add", id="call_0", a=3, b=4)]},
        "done",
    )
    result = await run_agent(Agent(model=model, tools=[add]))  # drive checks the grammar
    assert (result.stop_reason, ran) == ("completed", [(1, 2), (3, 4)])
    assert [m.content for m in sent(model.requests[2]) if isinstance(m, ToolResultMessage)] == [
        "3",
        "7",
    ]


async def test_the_checker_still_rejects_a_repeated_id_in_one_reply_and_a_reuse_while_open():
    model = scripted(
        {"tool_calls": [call("add", id="call_0", a=1, b=2)]},
        {"tool_calls": [call("add", id="call_0", a=3, b=4)]},
        "done",
    )
    events = (await Session(Agent(model=model, tools=[add])).run("go").result()).events
    check_events(events)
    first = next(i for i, e in enumerate(events) if e.type == "tool:output")
    still_open = events[:first] + events[first + 2 :]  # call_0's output and result are gone
    with pytest.raises(AssertionError, match="call id call_0 reused while that call is still open"):
        check_events(still_open)
    at = next(i for i, e in enumerate(events) if e.type == "message:completed")
    message = events[at].message
    twice = replace(message, parts=message.parts * 2)
    doubled = [*events[:at], ev.MessageCompleted(message=twice), *events[at + 1 :]]
    with pytest.raises(AssertionError, match="one reply holds a call id twice"):
        check_events(doubled)


def test_check_reply_leaves_a_good_reply_alone_and_never_picks_a_taken_id():
    good = AssistantMessage(parts=(ToolCall(id="a", name="t", args={}),))
    assert check_reply(good) == (good, {})
    assert check_reply(good)[0] is good
    calls = (
        ToolCall(id="k", name="t", args={}),
        ToolCall(id="k", name="t", args={}),
        ToolCall(id="k-2", name="t", args={}),
        ToolCall(id=None, name=None, args=None),  # type: ignore[arg-type]
        ToolCall(id="k", name="t", args={}),
    )
    message, problems = check_reply(AssistantMessage(parts=calls))
    assert [c.id for c in message.tool_calls] == ["k", "k-3", "k-2", "call_3", "k-4"]
    assert list(problems) == ["k-3", "call_3", "k-4"]
    assert problems["call_3"] == (
        "Not run: the call had no id (got None); the tool name must be a non-empty string (got "
        "None); the arguments must be a JSON object (got None). Send the call again if you "
        "meant it."
    )


# -- the providers' readers: what the wire says reaches check_reply as text, never a crash ------


def test_anthropic_reader_reads_a_missing_id_and_a_number_name_as_text():
    reply = _Reply()
    for index, block in enumerate([{"id": None, "name": 42}, {"name": "add"}]):
        start = {"type": "tool_use", "input": {}, **block}
        reply.feed({"type": "content_block_start", "index": index, "content_block": start})
        reply.feed({"type": "content_block_stop", "index": index})
    reply.feed({"type": "message_stop"})
    done = reply.finish("anthropic:x", "x")
    assert isinstance(done, ev.MessageCompleted)
    assert done.message.tool_calls == [
        ToolCall(id="", name="42", args={}),
        ToolCall(id="", name="add", args={}),
    ]
    message, problems = check_reply(done.message)
    assert [c.id for c in message.tool_calls] == ["call_0", "call_1"] and len(problems) == 2


def test_openai_chat_reader_reads_numbers_as_text_and_a_missing_id_as_call_index():
    reader = ChatReader()
    fragments = [
        {"index": 0, "id": 5, "function": {"name": 42, "arguments": "{}"}},
        {"index": 1, "function": {"name": None, "arguments": "{}"}},
    ]
    for fragment in fragments:
        body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        body["choices"] = [{"index": 0, "delta": {"tool_calls": [fragment]}}]
        chunk = construct_type(type_=ChatCompletionChunk, value=body)  # unvalidated, as the SDK
        (delta,) = reader.read(chunk)
        assert isinstance(delta.id, str) and isinstance(delta.tool, str)
    assert [(b.id, b.name) for b in reader.parts.calls] == [("5", "42"), ("call_1", "")]


def test_openai_responses_reader_reads_a_missing_call_id_and_a_list_name_as_text():
    reader = ResponsesReader()
    item = {"type": "function_call", "id": "item_0", "call_id": None, "name": [1], "arguments": ""}
    body = {"type": "response.output_item.added", "output_index": 0, "sequence_number": 1}
    added = construct_type(type_=ResponseOutputItemAddedEvent, value={**body, "item": item})
    list(reader.read(added))
    parts: ReplyParts = reader.parts
    assert [(b.id, b.name) for b in parts.calls] == [("", "[1]")]


async def test_arguments_holding_an_infinity_or_a_nan_are_an_error_never_run():
    """`1e400` and `NaN` read (json.loads) as floats no JSON encoder writes back: the gate and
    the tool would see one value, the log, the wire and an MCP server another."""
    bad = AssistantMessage(
        parts=(
            ToolCall(id="c1", name="add", args={"a": 1e400, "b": 1}),
            ToolCall(id="c2", name="add", args={"a": 1, "b": [float("nan")]}),
            ToolCall(id="c3", name="add", args={"a": 2, "b": 2}),
        ),
        stop_reason="tool_use",
    )
    ran.clear()
    model = Wire([bad, AssistantMessage(parts=(Text(text="4"),))])
    result = await run_agent(Agent(model=model, tools=[add]))
    assert (result.stop_reason, ran) == ("completed", [(2, 2)])
    messages = sent(model.requests[1])
    assert [c.args for c in messages[1].tool_calls] == [{}, {}, {"a": 2, "b": 2}]
    assert [m.content for m in messages[2:4]] == [
        "Not run: the arguments must be JSON: a is inf, not a JSON number. "
        "Send the call again if you meant it.",
        "Not run: the arguments must be JSON: b.0 is nan, not a JSON number. "
        "Send the call again if you meant it.",
    ]
    assert_history_valid(messages)


async def test_a_tuple_a_float_subclass_or_a_decimal_cannot_hide_an_infinity():
    """A Python model (FunctionModel) may put tuples, float subclasses or decimals in a call's
    arguments: an infinity inside them is as much a bad call."""

    class Number(float):
        pass

    bad = AssistantMessage(
        parts=(
            ToolCall(id="c1", name="add", args={"a": 1, "b": (1.0, float("inf"))}),
            ToolCall(id="c2", name="add", args={"a": Number("-inf"), "b": 1}),
            ToolCall(id="c3", name="add", args={"a": 1, "b": {"x": Decimal("Infinity")}}),
        ),
        stop_reason="tool_use",
    )
    ran.clear()
    model = Wire([bad, AssistantMessage(parts=(Text(text="none"),))])
    result = await run_agent(Agent(model=model, tools=[add]))
    assert (result.stop_reason, ran) == ("completed", [])
    assert [m.content for m in sent(model.requests[1])[2:5]] == [
        f"Not run: the arguments must be JSON: {where}, not a JSON number. "
        "Send the call again if you meant it."
        for where in ("b.1 is inf", "a is -inf", "b.x is Infinity")
    ]


async def test_arguments_a_before_tool_hook_gives_are_judged_as_json_too():
    """A hook that hands back arguments holding an infinity makes the call invalid (the
    model's own arguments stay in the log), as the model's reply would."""
    from loopwright import Hooks

    def before_tool(info: Any, call: ToolCall) -> dict[str, Any]:
        return {"a": float("inf"), "b": 1}

    ran.clear()
    model = Wire(
        [
            AssistantMessage(
                parts=(ToolCall(id="c1", name="add", args={"a": 1, "b": 2}),),
                stop_reason="tool_use",
            ),
            AssistantMessage(parts=(Text(text="no"),)),
        ]
    )
    result = await run_agent(Agent(model=model, tools=[add], hooks=Hooks(before_tool=before_tool)))
    assert (result.stop_reason, ran) == ("completed", [])
    [done] = [e for e in result.events if e.type == "tool:result"]
    assert done.args == {"a": 1, "b": 2}
    assert [m.content for m in sent(model.requests[1])[2:3]] == [
        "Invalid arguments for tool 'add': a is inf, not a JSON number"
    ]


def test_a_streamed_preview_of_arguments_never_holds_an_infinity():
    """`tool:delta`'s parsed-so-far arguments leave out what no JSON encoder writes back."""
    from loopwright.providers._openai_common import ToolCallBuffer
    from loopwright.providers.anthropic import _partial_args

    buffer = ToolCallBuffer(id="c1", name="add")
    assert buffer.feed('{"a": 1, ').partial_args == {"a": 1}
    assert buffer.feed('"b": 1e400').partial_args is None
    assert (_partial_args('{"a": 1, '), _partial_args('{"a": NaN, ')) == ({"a": 1}, None)


def test_an_acp_form_field_too_deep_to_read_is_left_as_text():
    from loopwright.acp.edits import edited

    deep = "[" * 3000 + "]" * 3000
    assert edited({"meta": {}}, {"meta": deep}) == {"meta": deep}


async def test_arguments_nested_too_deep_for_the_log_are_an_error_never_run():
    deep: Any = 1
    for _ in range(150):
        deep = [deep]
    bad = AssistantMessage(
        parts=(ToolCall(id="c1", name="add", args={"a": deep, "b": 1}),), stop_reason="tool_use"
    )
    ran.clear()
    model = Wire([bad, AssistantMessage(parts=(Text(text="no"),))])
    result = await run_agent(Agent(model=model, tools=[add]))
    assert (result.stop_reason, ran) == ("completed", [])
    assert [m.content for m in sent(model.requests[1])[2:3]] == [
        "Not run: the arguments must be JSON: they nest deeper than 100 levels. "
        "Send the call again if you meant it."
    ]
