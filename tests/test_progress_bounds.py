"""Every stream bounded (P10): what a call streams besides its result is bounded as its result
is. One progress message is cut at `MAX_UPDATE` characters; a call keeps at most `MAX_UPDATES`
updates and at most its result's limit of progress text; what is dropped is said once, by one
more `tool:update` before the call's result. Driven through a real SQLite log (the rows a run
stored are counted), with a Python tool and a real MCP server over stdio that floods progress;
the text of a tool that raised and an MCP server's question are cut as results are."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from conftest import call, scripted
from loopwright import Agent, tool
from loopwright import events as ev
from loopwright.loop.progress import MAX_UPDATE, MAX_UPDATES
from loopwright.mcp import MCPServer, StdioServer, elicit
from loopwright.store.log import SessionKey
from loopwright.tools import NeedsAnswer, ToolContext
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import ended

KEY = SessionKey("acme", "flooder", "s1")


def flooder(count: int, size: int, *, fractions: bool = True) -> Any:
    @tool
    async def flood(ctx: ToolContext) -> str:
        """Floods its progress."""
        for i in range(1, count + 1):
            head = f"{i}/{count} "
            ctx.progress(head + "x" * max(0, size - len(head)), i / count if fractions else None)
        return "flooded"

    return flood


async def stored(runtimes: Any, logs: Any, agent: Agent) -> list[ev.Event]:
    """The events a durable run of `agent` stored in a real SQLite log."""
    log = await logs()
    runtime = runtimes({"flooder": agent}, log)
    done = await ended(await runtime.send(KEY.tenant, KEY.agent, KEY.id, "go"))
    assert done.stop_reason == "completed"
    return [s.event for s in await log.read(KEY)]


def updates(events: list[ev.Event]) -> list[ev.ToolUpdate]:
    return [e for e in events if isinstance(e, ev.ToolUpdate)]


def cut_to(message: str) -> str:
    """A message over `MAX_UPDATE` as it is kept."""
    return f"{message[:MAX_UPDATE]}… [{len(message) - MAX_UPDATE:,} characters cut]"


def note(dropped: int, chars: int, cap: int = 50_000) -> str:
    return (
        f"[progress cut: {dropped:,} more updates ({chars:,} characters) dropped; a call keeps "
        f"{MAX_UPDATES} updates and {cap:,} characters of progress]"
    )


def call_events(events: list[ev.Event]) -> list[str]:
    """The run's event types from the call's start to its result, updates counted."""
    names = [e.type for e in events]
    span = names[names.index("tool:started") : names.index("tool:result") + 1]
    n = span.count("tool:update")
    return [span[0], f"tool:update×{n}", *[t for t in span[1:] if t != "tool:update"]]


async def test_5000_updates_of_4_kb_are_cut_and_bounded_by_the_calls_result_limit(
    runtimes: Any, logs: Any
) -> None:
    """The issue's flood: 5,000 × 4 kB in one call. Each is cut to 1,000 characters (and its
    mark), and the call's progress stops at 50,000 characters (`max_tool_output`): 48 kept,
    then one note for the 4,952 dropped (with the last fraction they reported)."""
    model = scripted({"tool_calls": [call("flood", "f1")]}, "ok")
    events = await stored(runtimes, logs, Agent(model=model, tools=[flooder(5_000, 4_000)]))
    kept = updates(events)
    assert len(kept) == 49 and call_events(events) == [
        "tool:started",
        "tool:update×49",
        "toollane:result",
        "tool:output",
        "tool:result",
    ]
    first = "1/5000 " + "x" * (4_000 - 7)
    assert kept[0] == ev.ToolUpdate(id="f1", tool="flood", message=cut_to(first), progress=1 / 5000)
    assert [len(u.message) for u in kept[:48]] == [1_024] * 48  # 48 × 1,024 ≤ 50,000 < 49 × 1,024
    assert [u.progress for u in kept[:48]] == [i / 5000 for i in range(1, 49)]
    assert kept[48] == ev.ToolUpdate(
        id="f1", tool="flood", message=note(4_952, 4_952 * 4_000), progress=1.0
    )
    [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
    assert output.content == "flooded"


async def test_a_call_keeps_at_most_max_updates_small_ones(runtimes: Any, logs: Any) -> None:
    """Small updates: the count bounds them (200 kept), the note says how many more came."""
    model = scripted({"tool_calls": [call("flood", "f1")]}, "ok")
    agent = Agent(model=model, tools=[flooder(5_000, 10, fractions=False)])
    kept = updates(await stored(runtimes, logs, agent))
    assert len(kept) == MAX_UPDATES + 1 == 201
    assert [u.message for u in kept[:3]] == ["1/5000 xxx", "2/5000 xxx", "3/5000 xxx"]
    assert kept[199].message == "200/5000 x"
    dropped = sum(len(f"{i}/5000 ") + max(0, 10 - len(f"{i}/5000 ")) for i in range(201, 5001))
    assert kept[200] == ev.ToolUpdate(id="f1", tool="flood", message=note(4_800, dropped))


async def test_a_flood_under_the_bounds_is_kept_whole_and_without_a_note(
    runtimes: Any, logs: Any
) -> None:
    model = scripted({"tool_calls": [call("flood", "f1")]}, "ok")
    kept = updates(await stored(runtimes, logs, Agent(model=model, tools=[flooder(3, 20)])))
    assert [(u.message, u.progress) for u in kept] == [
        ("1/3 xxxxxxxxxxxxxxxx", 1 / 3),
        ("2/3 xxxxxxxxxxxxxxxx", 2 / 3),
        ("3/3 xxxxxxxxxxxxxxxx", 1.0),
    ]


async def test_an_mcp_server_that_floods_progress_over_stdio(
    runtimes: Any, logs: Any, started: list[MCPServer]
) -> None:
    """The issue's MCP call: 40 × 1 MB of progress. Each is cut to 1,000 characters; with the
    agent's `max_tool_output` at 10,000 the call keeps 9 (9 × 1,026 ≤ 10,000), then one note."""
    here = Path(__file__).with_name("mcp_flood_server.py")
    server = MCPServer(StdioServer(name="f", command=sys.executable, args=(str(here),)))
    started.append(server)
    model = scripted({"tool_calls": [call("mcp__f__flood", "f1", count=40, size=1_000_000)]}, "ok")
    agent = Agent(model=model, tools=[server], max_tool_output=10_000)
    events = await stored(runtimes, logs, agent)
    kept = updates(events)
    assert call_events(events)[:2] == ["tool:started", "tool:update×10"]
    messages = [f"{i}/40 " + "x" * (1_000_000 - len(f"{i}/40 ")) for i in range(1, 41)]
    assert [(u.id, u.tool, u.message, u.progress) for u in kept[:9]] == [
        ("f1", "mcp__f__flood", cut_to(messages[i]), (i + 1) / 40) for i in range(9)
    ]
    assert [len(u.message) for u in kept[:9]] == [1_026] * 9
    assert kept[9] == ev.ToolUpdate(
        id="f1", tool="mcp__f__flood", message=note(31, 31_000_000, 10_000), progress=1.0
    )
    [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
    assert output.content == "flooded"


async def test_the_text_of_a_tool_that_raised_is_cut_as_a_result_is(
    runtimes: Any, logs: Any
) -> None:
    @tool
    def boom() -> str:
        """Raises with a long message."""
        raise RuntimeError("y" * 200_000)

    model = scripted({"tool_calls": [call("boom", "b1")]}, "ok")
    events = await stored(runtimes, logs, Agent(model=model, tools=[boom], max_tool_output=1_000))
    [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
    text = "Tool 'boom' failed: RuntimeError: " + "y" * 200_000
    assert output.is_error
    assert output.content == f"{text[:1_000]}… [{len(text) - 1_000:,} characters cut]"
    [lane] = [e for e in events if isinstance(e, ev.ToollaneResult)]
    assert lane.summary == output.content


async def test_an_mcp_servers_question_is_cut() -> None:
    """An elicitation's message and form become a question item: cut at `MAX_QUESTION`, the
    same text every time (it keys the answer), and at most `MAX_OPTIONS` suggested answers."""
    schema = {"properties": {"pick": {"type": "string", "enum": [str(i) for i in range(500)]}}}
    asked = await elicit.answer("srv", None, "m" * 100_000, schema)
    assert isinstance(asked, NeedsAnswer)
    whole = f"The MCP server 'srv' asks: {'m' * 100_000}\n- pick (string)"
    assert asked.question == f"{whole[:4_000]}… [{len(whole) - 4_000:,} characters cut]"
    assert asked.options == [str(i) for i in range(50)]
    assert (await elicit.answer("srv", None, "m" * 100_000, schema)) == asked


async def test_a_result_keeps_at_most_max_attachments(runtimes: Any, logs: Any) -> None:
    """Each attachment is bounded (5 MB), and so is their number: a result keeps the first
    `MAX_ATTACHMENTS` and its text says how many more were dropped."""
    from loopwright.attachments import document
    from loopwright.loop.calls import MAX_ATTACHMENTS

    @tool
    async def pages() -> list[Any]:
        """Returns many pages."""
        return ["the pages", *(document(f"page {i}".encode(), name=f"p{i}.txt") for i in range(25))]

    model = scripted({"tool_calls": [call("pages", "p1")]}, "ok")
    events = await stored(runtimes, logs, Agent(model=model, tools=[pages]))
    [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
    assert MAX_ATTACHMENTS == 20
    assert output.content == "the pages\n[5 more attachments dropped]"
    assert [a.name for a in output.attachments or ()] == [f"p{i}.txt" for i in range(20)]
