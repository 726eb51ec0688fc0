"""Toolsets: fixed ones flattened into the agent; live ones entered once per owner (a runtime,
a session or a `Toolsets` sessions share), listed before each model request when their version
changed, and exited by their owner."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, ConfigError, Session, tool
from loopwright.tools import Tool
from loopwright.toolsets import ToolList, Toolset, Toolsets


@tool(inline=True)
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool(inline=True)
def pong() -> str:
    """Answer ping."""
    return "ping"


class Growing(Toolset):
    """A live source that offers `ping`, and `pong` too once `grow` ran (a list change)."""

    name = "growing"

    def __init__(self, fail: bool = False) -> None:
        self.entered = 0
        self.exited = 0
        self.listings = 0
        self.grown = False
        self.fail = fail
        self._version = 0

        @tool(inline=True)
        def grow() -> str:
            """Offer one more tool."""
            self.grown = True
            self._version += 1
            return "grown"

        self.grow = grow

    @property
    def version(self) -> int:
        return self._version

    async def enter(self) -> None:
        self.entered += 1

    async def list_tools(self) -> Sequence[Tool]:
        self.listings += 1
        if self.fail:
            raise RuntimeError("server gone")
        return [self.grow, ping, pong] if self.grown else [self.grow, ping]

    async def exit(self) -> None:
        self.exited += 1


@pytest.fixture
async def entered():
    """The owner the test's sessions share, exited as the test ends."""
    async with Toolsets() as owner:
        yield owner


def names(request) -> list[str]:
    return [t.name for t in request.tools]


def test_fixed_toolsets_are_flattened_in_order_and_checked_for_duplicates():
    agent = Agent(model="scripted", tools=[ToolList([pong], name="mine"), ping])
    assert [s.name for s in agent.tool_specs] == ["pong", "ping"]
    assert agent.current_tools == (pong, ping)
    with pytest.raises(ConfigError, match=r"duplicate tool names \['ping'\]"):
        Agent(model="scripted", tools=[ToolList([ping]), ping])
    with pytest.raises(ConfigError, match="neither a tool nor a toolset"):
        Agent(model="scripted", tools=[print])  # type: ignore[list-item]


async def test_a_live_toolset_is_entered_once_per_owner_and_listed_again_only_when_it_changed(
    entered,
):
    source = Growing()
    model = scripted(
        {"tool_calls": [call("grow")]}, {"tool_calls": [call("pong")]}, "done", "again", "own"
    )
    agent = Agent(model=model, tools=[source, ToolList([], name="none")])
    assert agent.tool_specs == ()  # nothing is listed before a run needs it

    result = await drive(Session(agent, toolsets=entered).run("hello"))

    assert result.text == "done"
    assert [names(r) for r in model.requests] == [
        ["grow", "ping"],
        ["grow", "ping", "pong"],  # `grow` changed the list: the next request sees it
        ["grow", "ping", "pong"],
    ]
    tool_results = [e.content for e in result.events if e.type == "tool:output"]
    assert tool_results == ["grown", "ping"]
    assert (source.entered, source.listings) == (1, 2)
    assert source in entered

    # another session with the same owner shares the entered toolset and the agent's listing:
    # its first request already offers `pong`
    await drive(Session(agent, toolsets=entered).run("hi"))
    assert names(model.requests[3]) == ["grow", "ping", "pong"]
    assert (source.entered, source.listings) == (1, 3)  # its `grow` changed the version again

    # a session given no owner has its own: it enters the toolset for itself, and exits it
    own = Session(agent)
    await drive(own.run("mine"))
    assert (source.entered, source.exited) == (2, 0)
    assert source in own.toolsets and own.toolsets is not entered
    await own.toolsets.exit_all()
    assert (source.entered, source.exited) == (2, 1)

    await entered.exit_all()
    assert source.exited == 2 and source not in entered
    await drive(Session(Agent(model=scripted("back"), tools=[source]), toolsets=entered).run("x"))
    assert source.entered == 3 and source in entered  # entered again on use


async def test_a_subagents_session_enters_through_its_parents_owner(entered):
    from loopwright.subagents import subagents

    source = Growing()
    child = Agent(
        name="helper",
        description="Helps.",
        model=scripted({"tool_calls": [call("ping")]}, "helped"),
        tools=[source],
    )
    model = scripted({"tool_calls": [call("helper", request="help")]}, "done")
    result = await drive(
        Session(Agent(model=model, tools=[subagents(child)]), toolsets=entered).run("go")
    )
    assert result.text == "done" and source.entered == 1 and source in entered


async def test_a_toolset_that_fails_to_list_leaves_the_run_going_without_it(caplog, entered):
    source = Growing(fail=True)
    model = scripted({"tool_calls": [call("ping")]}, "done")
    agent = Agent(model=model, tools=[source, pong])

    with caplog.at_level(logging.ERROR, logger="loopwright.tools"):
        result = await drive(Session(agent, toolsets=entered).run("hello"))

    assert [names(r) for r in model.requests] == [["pong"], ["pong"]]
    errors = [e for e in result.events if e.type == "tool:output"]
    assert [(e.is_error, e.content) for e in errors] == [
        (True, "Unknown tool 'ping'. Available tools: pong.")
    ]
    assert source.listings == 2  # tried again before the next request
    failed = [r for r in caplog.records if "failed to list" in r.getMessage()]
    assert len(failed) == 2 and "server gone" in (failed[0].exc_text or "")


async def test_a_live_tool_named_like_a_fixed_one_is_left_out_and_logged(caplog, entered):
    model = scripted("done")
    agent = Agent(model=model, tools=[ping, Growing()])
    with caplog.at_level(logging.WARNING, logger="loopwright.tools"):
        await drive(Session(agent, toolsets=entered).run("hello"))
    assert names(model.requests[0]) == ["ping", "grow"]
    assert [r.getMessage() for r in caplog.records] == [
        "agent 'agent': toolset 'growing' repeats the tool name 'ping': left out"
    ]


async def test_sessions_see_live_tools_in_their_state_for_a_resumed_call(entered):
    source = Growing()
    agent = Agent(model=scripted("done"), tools=[source])
    session = Session(agent, toolsets=entered)
    await session.run("go").result()
    assert session.state.tools["ping"] is ping  # the agent's table, updated in place


async def test_subagents_are_a_fixed_toolset():
    from loopwright.subagents import subagents

    child = Agent(name="helper", description="Helps.", model=scripted("helped"))
    model = scripted({"tool_calls": [call("helper", request="help")]}, "done")
    result = await run_agent(Agent(model=model, tools=[subagents(child)]))
    assert names(model.requests[0]) == ["helper"]
    outputs = [e.content for e in result.events if e.type == "tool:output"]
    assert (outputs, result.text) == (["helped"], "done")
