"""A tool's `label`, its result's UI-only `details` and its `prepare_arguments` (issue 35, row 6):
in the events a door reads, in the log and the history, never in what the model is sent; the
prepared arguments are what the hook, the gate, the human and the tool see."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, Approval, Rules, Session, tool
from loopwright.cli.render import Console, Human
from loopwright.hooks import Hooks
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.providers import anthropic, openai_chat
from loopwright.state import stored
from loopwright.testing import types
from loopwright.tools import ToolContext, ToolReturn
from loopwright.wire import dumps, messages_to_json, to_dict

seen: list[Any] = []


@tool(label="Read file")
def read(path: str) -> ToolReturn:
    """Read a file."""
    seen.append(path)
    return ToolReturn(content=f"text of {path}", details={"lines": 3, "diff": "+a\n-b"})


@tool(label="Count")
async def count(n: int, ctx: ToolContext) -> str:
    """Count to n."""
    ctx.progress("half way", 0.5, details={"at": n // 2})
    return f"counted to {n}"


def fix_path(args: dict[str, Any]) -> dict[str, Any]:
    """The model sends `file` where the schema says `path`; and relative paths."""
    path = args.pop("file", None) or args.pop("path")
    return {**args, "path": path if path.startswith("/") else "/srv/files/" + path}


@tool(prepare_arguments=fix_path, label="Open")
def open_file(path: str) -> str:
    """Open a file."""
    seen.append(path)
    return f"opened {path}"


def broken(args: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("nope")


@tool(prepare_arguments=broken)
def fragile(path: str) -> str:
    """Never runs."""
    seen.append(path)
    return "ran"


def tool_events(result: Any) -> list[str]:
    names = types(result.events)
    return names[names.index("message:completed") + 1 : names.index("step:finished")]


async def test_label_and_details_are_in_the_events_the_log_and_history_never_the_model():
    seen.clear()
    model = scripted({"tool_calls": [call("read", "c1", path="a.txt")]}, "done")
    session = Session(Agent(model=model, tools=[read]))
    result = await drive(session.run("go"))
    assert tool_events(result) == [
        "actauth:decision",
        "tool:started",
        "toollane:result",
        "tool:output",
        "tool:result",
    ]
    started = next(e for e in result.events if e.type == "tool:started")
    output = next(e for e in result.events if e.type == "tool:output")
    assert started.label == "Read file"
    assert output.details == {"lines": 3, "diff": "+a\n-b"}
    assert output.content == "text of a.txt"
    assert to_dict(started)["label"] == "Read file"
    assert "label" not in to_dict(started, "v1")
    assert to_dict(output)["details"] == {"lines": 3, "diff": "+a\n-b"}
    # the model's second request: the result's text; what each provider would send of that
    # request holds no trace of the details (the history keeps them for the doors)
    request = model.requests[1]
    sent = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    assert sent == ["text of a.txt"]
    for payload in (anthropic.to_messages(request.messages), openai_chat.to_messages(request)):
        assert "text of a.txt" in json.dumps(payload)
        assert "diff" not in json.dumps(payload) and "lines" not in json.dumps(payload)
    history = session.state.history
    kept = next(m for m in history.messages if isinstance(m, ToolResultMessage))
    assert kept.details == {"lines": 3, "diff": "+a\n-b"}
    assert '"details":{"lines":3,"diff":"+a\\n-b"}' in messages_to_json([kept])
    assert stored.decode(messages_to_json([kept])) == [kept]  # (a snapshot keeps them: pydantic)


async def test_progress_carries_details():
    model = scripted({"tool_calls": [call("count", "c1", n=4)]}, "done")
    result = await run_agent(Agent(model=model, tools=[count]))
    update = next(e for e in result.events if e.type == "tool:update")
    assert (update.message, update.progress, update.details) == ("half way", 0.5, {"at": 2})
    assert dumps(update) == (
        '{"id":"c1","tool":"count","message":"half way","progress":0.5,"details":{"at":2},'
        '"type":"tool:update"}'
    )


async def test_without_label_or_details_the_frames_are_as_before():
    @tool
    def plain(x: int) -> str:
        """Plain."""
        return str(x)

    model = scripted({"tool_calls": [call("plain", "c1", x=1)]}, "done")
    result = await run_agent(Agent(model=model, tools=[plain]))
    started = next(e for e in result.events if e.type == "tool:started")
    output = next(e for e in result.events if e.type == "tool:output")
    assert list(to_dict(started)) == ["id", "tool", "args", "detailText", "idempotencyKey", "type"]
    assert dumps(output) == (
        '{"id":"c1","tool":"plain","content":"1","isError":false,"type":"tool:output"}'
    )


async def test_prepare_arguments_runs_before_validation_and_the_tool_sees_its_result():
    seen.clear()
    model = scripted({"tool_calls": [call("open_file", "c1", file="notes.md")]}, "done")
    session = Session(Agent(model=model, tools=[open_file]))
    result = await drive(session.run("go"))
    assert seen == ["/srv/files/notes.md"]
    started = next(e for e in result.events if e.type == "tool:started")
    assert (started.args, started.label) == ({"path": "/srv/files/notes.md"}, "Open")
    assert next(e for e in result.events if e.type == "tool:output").content == (
        "opened /srv/files/notes.md"
    )
    # the reply in the history keeps what the model sent
    reply = session.state.history.messages[1]
    assert [p.args for p in reply.parts if isinstance(p, ToolCall)] == [{"file": "notes.md"}]


async def test_a_prepare_that_raises_is_an_error_result_the_model_reads(caplog):
    seen.clear()
    model = scripted({"tool_calls": [call("fragile", "c1", path="x")]}, "done")
    with caplog.at_level(logging.WARNING, "loopwright.tools"):
        result = await run_agent(Agent(model=model, tools=[fragile]))
    assert seen == []
    assert tool_events(result) == ["tool:output", "tool:result"]
    output = next(e for e in result.events if e.type == "tool:output")
    assert (output.content, output.is_error) == (
        "Invalid arguments for tool 'fragile': KeyError: 'nope'",
        True,
    )
    sent = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [m.content for m in sent] == [output.content]
    assert [r.getMessage() for r in caplog.records] == [
        "tool fragile (call c1): prepare_arguments raised"
    ]


RULES = Rules.from_yaml("""
default_decision: deny
rules:
  - {name: under-work, tool: open_file, decision: ask, when: {field: path, op: matches, value: '^/srv/files/'}}
""")


async def test_the_gate_and_the_human_see_the_prepared_arguments():
    seen.clear()
    asked: list[Any] = []

    def person(request: Any) -> Approval:
        asked.append(request.args)
        return Approval.approve()

    model = scripted({"tool_calls": [call("open_file", "c1", file="notes.md")]}, "done")
    result = await run_agent(Agent(model=model, tools=[open_file], rules=RULES), approver=person)
    assert asked == [{"path": "/srv/files/notes.md"}]
    pending = next(e for e in result.events if e.type == "approval:pending")
    assert (pending.args, pending.label, pending.reason) == (
        {"path": "/srv/files/notes.md"},
        "Open",
        "matched rule 'under-work'",
    )
    assert "label" not in to_dict(pending, "v1") and to_dict(pending)["label"] == "Open"
    assert seen == ["/srv/files/notes.md"]


async def test_before_tool_hook_sees_the_prepared_arguments():
    seen.clear()
    hooked: list[Any] = []

    def before_tool(info: Any, call_: ToolCall) -> None:
        hooked.append(call_.args)

    model = scripted({"tool_calls": [call("open_file", "c1", file="a")]}, "done")
    agent = Agent(model=model, tools=[open_file], hooks=Hooks(before_tool=before_tool))
    await run_agent(agent)
    assert hooked == [{"path": "/srv/files/a"}]
    assert seen == ["/srv/files/a"]


async def test_the_terminal_shows_the_label_and_a_dim_line_of_details():
    model = scripted(
        {"tool_calls": [call("read", "c1", path="a.txt")]},
        {"tool_calls": [call("count", "c2", n=4)]},
        "done",
    )
    result = await run_agent(Agent(model=model, tools=[read, count]))
    out, err = io.StringIO(), io.StringIO()
    human = Human(Console(out, err))
    for event in result.events:
        human.show(event)
    lines = [line for line in err.getvalue().splitlines() if line[:1] in "→←" or "  " in line]
    assert lines == [
        '→ Read file {"path": "a.txt"}',
        "← Read file text of a.txt",
        '  {"lines": 3, "diff": "+a\\n-b"}',
        '→ Count {"n": 4}',
        "  … Count: half way (50%)",
        '  {"at": 2}',
        "← Count counted to 4",
    ]


def test_an_mcp_tool_takes_its_title_as_its_label():
    from mcp.types import Tool as Listed
    from mcp.types import ToolAnnotations

    from loopwright.mcp import MCPServer, StdioServer
    from loopwright.mcp.naming import build_tools

    server = MCPServer(StdioServer(name="fs", command="unused"))
    listed = [
        Listed(name="a", title="Read a file", inputSchema={"type": "object"}),
        Listed(
            name="b", inputSchema={"type": "object"}, annotations=ToolAnnotations(title="Write")
        ),
        Listed(name="c", inputSchema={"type": "object"}),
    ]
    assert [t.label for t in build_tools(server, listed)] == ["Read a file", "Write", None]
