"""Snapshots of long sessions (issue 32, goal 2): a snapshot serialises and redacts each message
once (the JSON kept with the history, `History.encoded`), whatever happened between two
snapshots (appends, a compaction, an open batch, a reopen), and reads its messages back with
`state.stored.decode`, which makes what pydantic's validation makes."""

from __future__ import annotations

import dataclasses
import json

import pytest

from loopwright import events as ev
from loopwright import wire
from loopwright.attachments import Attachment
from loopwright.messages import (
    AssistantMessage,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from loopwright.state import snapshots, stored
from loopwright.state._values import wire_name
from loopwright.state.replay import fold
from loopwright.state.snapshots import from_snapshot, to_snapshot

SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"  # an AWS key id's shape: redacted wherever it is stored


def turn(i: int) -> list[ev.Event]:
    call = ToolCall(id=f"c{i}", name="ping", args={"i": i})
    return [
        ev.InputReceived(message=UserMessage(content=f"ask {i}")),
        ev.MessageCompleted(message=AssistantMessage(parts=(call,), stop_reason="tool_use")),
        ev.ToolStarted(id=f"c{i}", tool="ping", args={"i": i}, detail_text=""),
        ev.ToolOutput(id=f"c{i}", tool="ping", content=f"pong {i}"),
        ev.MessageCompleted(message=AssistantMessage(parts=(Text(text=f"done {i}"),))),
        ev.Done(text=f"done {i}", stop_reason="end_turn"),
    ]


def plain(state) -> str:
    """The snapshot as it is written with nothing kept (every message serialised now)."""
    state.history.encoded = None
    return to_snapshot(state)


@pytest.fixture
def serialised(monkeypatch) -> list[int]:
    """How many messages each `messages_to_json` call of the snapshots serialised."""
    counts: list[int] = []
    real = wire.messages_to_json

    def counting(messages):
        counts.append(len(messages))
        return real(messages)

    monkeypatch.setattr(snapshots, "messages_to_json", counting)
    return counts


def test_a_snapshot_serialises_only_the_messages_it_did_not_hold(serialised):
    events = [ev.Session(session_id="s"), *turn(1), *turn(2)]
    state = fold(events, {})
    first = to_snapshot(state)
    assert serialised == [8]
    fold(turn(3), {}, state)
    second = to_snapshot(state)
    assert serialised == [8, 4]  # the third turn's four messages, not the twelve
    assert to_snapshot(state) == second and serialised == [8, 4]  # nothing new: nothing
    assert second == plain(fold(turn(3), {}, fold(events, {}))) != first
    restored = from_snapshot(second, {})
    assert restored.history == state.history
    fold(turn(4), {}, restored)  # read back: its messages' JSON is the snapshot's own
    assert to_snapshot(restored) == plain(fold([*events, *turn(3), *turn(4)], {}))
    assert serialised[2:] == [12, 4, 16]  # (`plain` serialises all of them)


def test_a_compaction_or_an_open_batch_is_written_as_it_is(serialised):
    state = fold([ev.Session(session_id="s"), *turn(1), *turn(2)], {})
    to_snapshot(state)
    compacted = ev.CompactionFinished(from_=8, to=5, mode="summarize", dropped=4, summary="s1")
    fold([ev.CompactionStarted(reason="manual"), compacted], {}, state)
    written = to_snapshot(state)
    assert serialised == [8, 5]  # the history changed under its kept JSON: all of it again
    assert json.loads(written)["messages"][0]["content"].endswith("s1")
    assert from_snapshot(written, {}).history == state.history
    two = (ToolCall(id="a", name="ping", args={}), ToolCall(id="b", name="ping", args={}))
    fold(  # a batch open: its calls and result so far ride beside the history
        [
            ev.InputReceived(message=UserMessage(content="two")),
            ev.MessageCompleted(message=AssistantMessage(parts=two, stop_reason="tool_use")),
            ev.ToolOutput(id="a", tool="ping", content="pong a"),
        ],
        {},
        state,
    )
    assert state.batch is not None
    written = to_snapshot(state)
    assert serialised[2:] == [2, 2]  # the new input and reply; the batch (its calls, a result)
    assert written == plain(state)
    restored = from_snapshot(written, {})
    assert restored.history == state.history and restored.batch == state.batch


def test_a_secret_is_redacted_in_every_part_of_an_incremental_snapshot():
    state = fold(
        [ev.Session(session_id="s"), ev.InputReceived(message=UserMessage(content=SECRET))], {}
    )
    to_snapshot(state)
    fold([ev.InputReceived(message=UserMessage(content=f"again {SECRET}"))], {}, state)
    written = to_snapshot(state)
    assert "AKIA" not in written
    assert [m.content for m in from_snapshot(written, {}).history.messages] == [
        "[redacted]",
        "again [redacted]",
    ]


EVERY_FIELD = [
    UserMessage(content="hi"),
    UserMessage(
        content="look",
        attachments=(Attachment(type="image", media_type="image/png", sha256="ab", size=3),),
    ),
    AssistantMessage(
        parts=(
            Thinking(text="hmm", signature="sig"),
            Thinking(text="unsigned"),
            Text(text="ok"),
            ToolCall(id="c", name="n", args={"a": [1, 2.5, None, {"b": True}]}),
        ),
        stop_reason="tool_use",
        usage=Usage(
            input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4, cost=0.5
        ),
        model="m:x",
    ),
    AssistantMessage(),
    ToolResultMessage(call_id="c", tool="n", content="r", is_error=True),
    ToolResultMessage(
        call_id="c",
        tool="n",
        content="r",
        attachments=(Attachment(type="document", media_type="text/plain", url="https://x/y"),),
    ),
]


def test_decode_makes_what_pydantic_makes():
    text = wire.messages_to_json(EVERY_FIELD)
    assert stored.decode(text) == wire.messages_from_json(text) == EVERY_FIELD
    for known in ('"role":"user"}', '"type":"text"}', '"cacheWriteTokens":4', '"isError":true'):
        assert known in text
        unknown = text.replace(
            known, f'{known[:-1]},"later":1}}' if known[-1] == "}" else f'{known},"later":1', 1
        )
        with pytest.raises(ValueError):  # a key it does not know is pydantic's to judge
            stored.decode(unknown)
    with pytest.raises(ValueError):
        stored.decode('{"role":"user"}')


@pytest.mark.parametrize(
    ("cls", "keys"),
    [
        (UserMessage, stored.USER | {"attachments"}),
        (AssistantMessage, stored.ASSISTANT),
        (ToolResultMessage, stored.RESULT | {"attachments", "details"}),
        (Text, stored.TEXT),
        (Thinking, stored.THINKING),
        (ToolCall, stored.CALL),
        (Usage, stored.USAGE),
    ],
)
def test_decode_knows_every_field_of_the_values(cls, keys):
    """A field added to a message is read by pydantic (the fast path hands it over) until
    `stored` makes it too: this says so."""
    assert {wire_name(f.name) for f in dataclasses.fields(cls)} == keys
