"""Shared test helpers: every run a test drives goes through `drive`, which checks the event
grammar, validates each event against the generated full schema (and its v1 projection against
the loopengine v1 schema), and checks that each event survives a JSON round trip."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from loopwright import Agent, Session
from loopwright.events import Event
from loopwright.messages import AssistantMessage, UserMessage
from loopwright.session import Run, RunResult
from loopwright.testing import ScriptedModel, check_events
from loopwright.wire import event_schema, loads, to_dict

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
V1_SCHEMA = json.loads((SHARED / "protocol" / "loop-event.v1.schema.json").read_text())
V1 = Draft202012Validator(V1_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
FULL = Draft202012Validator(event_schema())


def verify(events: list[Event]) -> None:
    """The checks every stream in the suite must pass."""
    check_events(events)
    v1_stream = []
    for event in events:
        data = to_dict(event)
        assert data is not None
        FULL.validate(data)
        assert loads(json.dumps(data)) == event
        projected = to_dict(event, "v1")
        if projected is not None:
            V1.validate(projected)
            v1_stream.append(projected)
    assert v1_stream[0]["type"] == "session" and v1_stream[-1]["type"] == "done"


async def drive(run: Run) -> RunResult:
    result = await run.result()
    verify(result.events)
    return result


def scripted(*replies: Any) -> ScriptedModel:
    return ScriptedModel.from_script(list(replies))


def call(name: str, id: str | None = None, **args: Any) -> dict[str, Any]:
    """A scripted tool call."""
    return {"name": name, "args": args, "id": id or f"{name}_1"}


async def run_agent(agent: Agent, text: str = "go", **kwargs: Any) -> RunResult:
    return await drive(Session(agent).run(text, **kwargs))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def assert_history_valid(messages: list[Any]) -> None:
    """Every tool call is answered by exactly one result, in call order, right after it."""
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            following = messages[i + 1 : i + 1 + len(ids)]
            assert [getattr(m, "call_id", None) for m in following] == ids, (ids, following)
            i += 1 + len(ids)
            continue
        assert isinstance(message, (UserMessage, AssistantMessage)), message
        i += 1


@pytest.fixture(scope="module")
def http(server: Any) -> Iterator[Any]:
    """A client of the module's `server` fixture (see test_server.py: `served`)."""
    with server.client() as client:
        yield client
