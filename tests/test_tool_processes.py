"""Tools that start processes (issue 31, finding 9): `ToolContext.subprocess` starts one in a
process group of its own and stops the group (SIGTERM, then SIGKILL after the grace) when its
block ends, the run is cancelled or the call times out; a process the tool started itself is
not stopped. Each tool starts `sh`, which starts a `sleep` in the background and prints its
pid: the test watches that grandchild through a pidfd and waits for it to exit (bounded), never
on a sleep of its own."""

from __future__ import annotations

import asyncio
import os
import select
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import call, drive, scripted, verify
from loopwright import Agent, Session, tool
from loopwright import events as ev
from loopwright.loop.calls import STOPPED
from loopwright.testing import types
from loopwright.tools import ToolContext

BOUND = 30.0  # seconds before a wait that should end at once fails the test (never reached)
BACKGROUND = "sleep 300 >/dev/null & echo $!"  # (the pipe is sh's alone)


class Watched:
    """A process the test did not start, watched through a pidfd (readable once it exited)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.fd = pid, os.pidfd_open(pid)

    def alive(self) -> bool:
        return not select.select([self.fd], [], [], 0)[0]

    async def exited(self) -> bool:
        """Wait (bounded) until it exited; whether it did."""
        ready = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(self.fd, ready.set)
        try:
            async with asyncio.timeout(BOUND):
                await ready.wait()
        except TimeoutError:
            return False
        finally:
            loop.remove_reader(self.fd)
        return True


@pytest.fixture
def watched() -> Iterator[list[Watched]]:
    """The grandchildren the tools started; a test that fails leaves none of them running."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("watching a process that is not our child needs pidfds (Linux ≥ 5.3)")
    found: list[Watched] = []
    yield found
    for process in found:
        if process.alive():  # through the pidfd: never another process that got the pid
            signal.pidfd_send_signal(process.fd, signal.SIGKILL)
        os.close(process.fd)


def spawner(watched: list[Watched], script: str, leaders: list[Any], **flags: Any) -> Any:
    """A tool that runs `sh -c script` through `ctx.subprocess`, watches the pid the script
    prints first, and waits for `sh` to exit."""

    @tool(**flags)
    async def spawn(ctx: ToolContext) -> str:
        """Starts a process."""
        async with ctx.subprocess(
            "sh", "-c", script, stdout=asyncio.subprocess.PIPE, grace=BOUND
        ) as proc:
            assert proc.stdout is not None
            leaders.append(proc)
            watched.append(Watched(int(await proc.stdout.readline())))
            await proc.wait()
        return f"exit {proc.returncode}"

    return spawn


async def test_a_cancelled_run_stops_the_processes_its_call_started(
    watched: list[Watched],
) -> None:
    leaders: list[Any] = []
    script = f"{BACKGROUND}; wait"  # sh waits for the sleep: the call runs until cancelled
    model = scripted({"tool_calls": [call("spawn", "s1")]}, "never asked")
    session = Session(Agent(model=model, tools=[spawner(watched, script, leaders)]))
    events: list[ev.Event] = []
    async for event in session.run("go"):
        events.append(event)
        if event.type == "tool:started":
            while not watched:  # (the tool reads the grandchild's pid: one loop turn or a few)
                await asyncio.sleep(0)
            assert watched[0].alive()
            session.cancel()
    verify(events)
    assert await watched[0].exited()  # the sleep, in the group, was stopped
    assert leaders[0].returncode == -signal.SIGTERM  # sh was reaped before the call's result
    names = types(events)
    assert names[names.index("tool:started") :] == [
        "tool:started",
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]
    [output] = [e for e in events if isinstance(e, ev.ToolOutput)]
    assert (output.content, output.is_error) == (STOPPED, True)
    assert len(model.requests) == 1


async def test_a_call_that_times_out_has_its_processes_stopped(watched: list[Watched]) -> None:
    leaders: list[Any] = []
    script = f"{BACKGROUND}; wait"
    model = scripted({"tool_calls": [call("spawn", "s1")]}, "it timed out")
    spawn = spawner(watched, script, leaders, timeout=0.5)
    result = await drive(Session(Agent(model=model, tools=[spawn])).run("go"))
    assert await watched[0].exited()
    assert leaders[0].returncode == -signal.SIGTERM
    [output] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert (output.content, output.is_error) == ("Tool 'spawn' timed out after 0.5s.", True)
    assert result.text == "it timed out"


async def test_what_a_process_left_running_is_stopped_when_the_block_ends(
    watched: list[Watched],
) -> None:
    """sh exits at once; the sleep it left in the background is stopped as the block ends."""
    leaders: list[Any] = []
    model = scripted({"tool_calls": [call("spawn", "s1")]}, "done")
    result = await drive(
        Session(Agent(model=model, tools=[spawner(watched, BACKGROUND, leaders)])).run("go")
    )
    [output] = [e for e in result.events if isinstance(e, ev.ToolOutput)]
    assert (output.content, output.is_error) == ("exit 0", False)
    assert await watched[0].exited()


async def test_a_process_the_tool_started_itself_is_not_stopped(watched: list[Watched]) -> None:
    """As documented: without `ctx.subprocess` the runtime knows nothing of the process."""

    @tool
    async def spawn() -> str:
        """Starts a process of its own."""
        proc = await asyncio.create_subprocess_exec(
            "sh", "-c", f"{BACKGROUND}; wait", stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        watched.append(Watched(int(await proc.stdout.readline())))
        try:
            await proc.wait()
        finally:
            if proc.returncode is None:  # (the test's own cleanup: the runtime does none)
                proc.kill()
                await proc.wait()
        return "never"

    model = scripted({"tool_calls": [call("spawn", "s1")]}, "never asked")
    session = Session(Agent(model=model, tools=[spawn]))
    async for event in session.run("go"):
        if event.type == "tool:started":
            while not watched:
                await asyncio.sleep(0)
            session.cancel()
    assert watched[0].alive()  # the sleep outlived the call (the fixture kills it)
