"""Shared test helpers: every run a test drives goes through `drive`, which checks the event
grammar, validates each event against the generated full schema (and its v1 projection against
the repo's loopengine v1 schema, `protocol/loopengine-v1.schema.json`), and checks that each
event survives a JSON round trip. Every v1 object the suite validates is also kept (`V1.corpus`)
for the one test that compares our v1 schema with loopengine's own (test_protocol_v1.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from crash_model import pytest_terminal_summary  # noqa: F401 (the crash model's count)
from loopwright import Agent, Session
from loopwright.events import Event
from loopwright.loop.session import Run, RunResult
from loopwright.messages import AssistantMessage, UserMessage
from loopwright.testing import ScriptedModel, check_events
from loopwright.wire import event_schema, loads, to_dict
from pg_cluster import pg_url, postgres_url  # noqa: F401 (the PostgreSQL fixtures)

ROOT = Path(__file__).resolve().parents[1]
V1_SCHEMA = json.loads((ROOT / "protocol" / "loopengine-v1.schema.json").read_text())


class EventValidator:
    """An event schema (a `oneOf` of one definition per `type`) as a validator. An object is
    checked against its own type's definition alone, which is what the `oneOf` amounts to (each
    definition requires its own `type`) at a tenth of the cost; anything else against the whole.
    With `keep`, each distinct object it accepted is kept in `corpus`."""

    def __init__(self, schema: dict[str, Any], *, keep: bool = False) -> None:
        checker = Draft202012Validator.FORMAT_CHECKER
        self.validator = Draft202012Validator(schema, format_checker=checker)
        self.by_type: dict[str, Draft202012Validator] = {}
        for option in schema["oneOf"]:
            definition = schema["$defs"][option["$ref"].removeprefix("#/$defs/")]
            alone = {"$defs": schema["$defs"], "$ref": option["$ref"]}
            self.by_type[definition["properties"]["type"]["const"]] = Draft202012Validator(
                alone, format_checker=checker
            )
        self.keep = keep
        self.corpus: dict[str, dict[str, Any]] = {}

    def validate(self, instance: Any) -> None:
        kind = instance.get("type") if isinstance(instance, dict) else None
        validator = self.by_type.get(kind) if isinstance(kind, str) else None
        (validator or self.validator).validate(instance)
        if self.keep and len(self.corpus) < 5_000:
            self.corpus.setdefault(json.dumps(instance, sort_keys=True), instance)


FULL = EventValidator(event_schema())
V1 = EventValidator(V1_SCHEMA, keep=True)


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
async def started() -> AsyncIterator[list[Any]]:
    """MCP servers (`loopwright.mcp.MCPServer`) a test makes, stopped when it ends (whichever
    sessions entered them)."""
    servers: list[Any] = []
    yield servers
    for server in servers:
        await server.exit()


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
