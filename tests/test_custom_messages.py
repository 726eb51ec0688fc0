"""Custom messages (issue 35, row 5): an app's own entries in a session's history, logged as
`message:custom` between runs, kept by the log (SQLite, PostgreSQL), snapshots and compaction,
never sent to the model unless the agent's `convert` hook turns them into model messages."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from conftest import drive, scripted
from loopwright import Agent, Session
from loopwright import events as ev
from loopwright.errors import SessionBusy, UnknownSession
from loopwright.hooks import Hooks, RunInfo
from loopwright.messages import AssistantMessage, CustomMessage, Message, UserMessage
from loopwright.runtime import Runtime
from loopwright.runtime.custom import add_custom
from loopwright.state.compaction import SUMMARY_HEADER, Compaction
from loopwright.store.log import SessionKey, Store
from loopwright.testing import check_events, types
from runtime_fixtures import Held, ended, logs, pg_logs, runtimes  # noqa: F401 (fixtures)

NOTE = CustomMessage(kind="note", content="the user opened the billing tab", data={"tab": 2})


def said(text: str) -> tuple[str, str]:
    return ("assistant", text)


def shown(messages: Any) -> list[Any]:
    """Messages as (role, text), custom ones whole (a reply's usage varies with its request)."""
    return [
        ("assistant", m.text)
        if isinstance(m, AssistantMessage)
        else m
        if isinstance(m, CustomMessage)
        else ("user", m.content)
        if isinstance(m, UserMessage)
        else m
        for m in messages
    ]


def user(text: str) -> tuple[str, str]:
    return ("user", text)


def as_notes(info: RunInfo, messages: list[Message]) -> list[Message]:
    """A converter: custom notes become user messages the model reads."""
    return [
        UserMessage(content=f"[{m.kind}] {m.content}") if isinstance(m, CustomMessage) else m
        for m in messages
    ]


async def test_a_custom_message_is_in_the_history_but_not_in_the_models_request():
    model = scripted("first", "second")
    session = Session(Agent(model=model))
    await drive(session.run("hi"))
    added = await session.add(NOTE)
    assert added == ev.MessageCustom(message=NOTE)
    result = await drive(session.run("next"))
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
    assert shown(session.messages) == [
        user("hi"),
        said("first"),
        NOTE,
        user("next"),
        said("second"),
    ]
    assert shown(model.requests[1].messages) == [
        user("hi"),
        said("first"),
        user("next"),
    ]


async def test_the_convert_hook_decides_the_models_view():
    model = scripted("first", "second")
    seen: list[list[Message]] = []

    def convert(info: RunInfo, messages: list[Message]) -> list[Message]:
        seen.append(list(messages))
        return as_notes(info, messages)

    session = Session(Agent(model=model, hooks=Hooks(convert=convert)))
    await drive(session.run("hi"))
    await session.add(NOTE)
    await drive(session.run("next"))
    assert shown(seen[1]) == [user("hi"), said("first"), NOTE, user("next")]
    assert shown(model.requests[1].messages) == [
        user("hi"),
        said("first"),
        user("[note] the user opened the billing tab"),
        user("next"),
    ]
    assert session.messages[2] == NOTE  # the history keeps the custom message itself


async def test_a_convert_hook_returning_none_keeps_the_default_view():
    model = scripted("first", "second")
    session = Session(Agent(model=model, hooks=Hooks(convert=lambda info, messages: None)))
    await drive(session.run("hi"))
    await session.add(NOTE)
    await drive(session.run("next"))
    assert NOTE not in model.requests[1].messages
    assert len(model.requests[1].messages) == 3


async def test_a_custom_message_left_in_the_converted_view_ends_the_run_with_an_error():
    model = scripted("first", "second")
    session = Session(Agent(model=model, hooks=Hooks(convert=lambda info, messages: messages[:])))
    await drive(session.run("hi"))
    await session.add(NOTE)
    result = await drive(session.run("next"))
    assert result.stop_reason == "error"
    error = result.events[-2]
    assert isinstance(error, ev.LoopError)
    assert error.error == (
        "TypeError: the convert hook returned a CustomMessage (kind 'note'): the model reads "
        "user, assistant and tool messages only; turn it into one or drop it"
    )
    assert len(model.requests) == 1  # the second request was never sent


async def test_adding_during_a_run_is_refused_clearly():
    session = Session(Agent(model=scripted("first")))
    run = session.run("hi")
    with pytest.raises(SessionBusy, match="has a run in progress: a custom message joins"):
        await session.add(NOTE)
    await drive(run)
    assert NOTE not in session.messages


async def test_compaction_keeps_custom_messages_and_never_shows_them_to_the_summariser():
    model = scripted("a", "b", "summary of a and b")
    session = Session(Agent(model=model, compaction=Compaction(keep_last=2)))
    await drive(session.run("one"))
    await session.add(NOTE)
    await drive(session.run("two"))
    await drive(session.compact())
    assert shown(session.messages) == [
        user(f"{SUMMARY_HEADER}\nsummary of a and b"),
        NOTE,
        user("two"),
        said("b"),
    ]
    summarised = model.requests[2].messages[0]
    assert isinstance(summarised, UserMessage)
    assert "billing tab" not in summarised.content


def test_the_grammar_refuses_a_custom_message_in_a_runs_stream():
    stream: list[ev.Event] = [
        ev.Session(session_id="s"),
        ev.MessageCustom(message=NOTE),
        ev.LoopDone(text=""),
        ev.Done(text="", stop_reason="completed"),
    ]
    with pytest.raises(AssertionError, match="between runs, not in a run"):
        check_events(stream)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("logs" if request.param == "sqlite" else "pg_logs")


async def test_a_custom_message_is_durable_and_the_next_run_does_not_send_it(
    backend: Callable[..., Awaitable[Store]],
    runtimes: Callable[..., Runtime],  # noqa: F811
):
    make = backend
    model = scripted("first", "second")
    runtime = runtimes({"a": Agent(name="a", model=model)}, await make(), snapshot_every=1)
    live = await runtime.send("t", "a", "s1", "hi")
    await ended(live)
    key = SessionKey("t", "a", "s1")
    seq = await add_custom(runtime, key, NOTE)
    stored = await runtime.log.read(key, after=seq - 1)
    assert [(s.seq, s.event) for s in stored] == [(seq, ev.MessageCustom(message=NOTE))]

    other = runtimes({"a": Agent(name="a", model=scripted())}, await make())  # a new process
    assert shown((await other.open(key)).messages) == [user("hi"), said("first"), NOTE]
    with pytest.raises(UnknownSession):
        await add_custom(other, SessionKey("other-tenant", "a", "s1"), NOTE)

    await ended(await runtime.send("t", "a", "s1", "next"))
    assert shown(model.requests[1].messages) == [
        user("hi"),
        said("first"),
        user("next"),
    ]
    assert (await runtime.log.snapshot(key)) is not None  # (the last run saved one)
    reopened = await other.open(key)  # (from the snapshot the last run saved)
    assert shown(reopened.messages) == [
        user("hi"),
        said("first"),
        NOTE,
        user("next"),
        said("second"),
    ]


async def test_a_session_a_run_holds_refuses_a_custom_message_here_and_elsewhere(
    logs: Callable[..., Awaitable[Store]],  # noqa: F811
    runtimes: Callable[..., Runtime],  # noqa: F811
):
    held = Held()
    runtime = runtimes({"a": Agent(name="a", model=held.model)}, await logs())
    live = await runtime.send("t", "a", "s3", "hi")
    await held.asked.wait()
    key = SessionKey("t", "a", "s3")
    with pytest.raises(SessionBusy, match="is running"):
        await add_custom(runtime, key, NOTE)
    other = runtimes({"a": Agent(name="a", model=scripted())}, await logs())  # another process
    with pytest.raises(SessionBusy):  # (the run's lease)
        await add_custom(other, key, NOTE)
    held.give("done")
    await ended(live)
    assert "message:custom" not in [s.event.type for s in await runtime.log.read(key)]
    await add_custom(other, key, NOTE)  # between runs: taken
    assert (await other.open(key)).messages[-1] == NOTE


async def test_session_add_on_a_durable_session_is_logged(
    logs: Callable[..., Awaitable[Store]],  # noqa: F811
    runtimes: Callable[..., Runtime],  # noqa: F811
):
    runtime = runtimes({"a": Agent(name="a", model=scripted("first"))}, await logs())
    await ended(await runtime.send("t", "a", "s2", "hi"))
    key = SessionKey("t", "a", "s2")
    session = await runtime.open(key)
    await session.add(NOTE)
    kinds = [s.event.type for s in await runtime.log.read(key)]
    assert kinds[-1] == "message:custom"
    fresh = runtimes({"a": Agent(name="a", model=scripted())}, await logs())
    assert (await fresh.open(key)).messages[-1] == NOTE


def test_old_logs_and_wire_round_trip():
    from loopwright.wire import loads, messages_from_json, messages_to_json, to_dict

    data = to_dict(ev.MessageCustom(message=NOTE))
    assert data == {
        "type": "message:custom",
        "message": {
            "role": "custom",
            "kind": "note",
            "content": "the user opened the billing tab",
            "data": {"tab": 2},
        },
    }
    assert to_dict(ev.MessageCustom(message=NOTE), "v1") is None
    assert loads(data) == ev.MessageCustom(message=NOTE)
    old: list[Any] = [UserMessage(content="hi"), AssistantMessage()]
    assert messages_from_json(messages_to_json([*old, NOTE])) == [*old, NOTE]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_terminal_renderer_prints_a_custom_message_dimmed(monkeypatch: pytest.MonkeyPatch):
    from loopwright.cli.render import Console, Human

    monkeypatch.delenv("NO_COLOR", raising=False)
    out, err = io.StringIO(), Terminal()
    Human(Console(out, err)).show(ev.MessageCustom(message=NOTE))
    assert (out.getvalue(), err.getvalue()) == (
        "",
        "\x1b[2m[note] the user opened the billing tab\x1b[0m\n",
    )
