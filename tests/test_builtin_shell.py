"""The shell tool: runs in the workspace, caps its output (head and tail), filters the
environment, reports the exit status, and stops the whole process group on timeout and on
cancellation (a grandchild is shown gone). Tests synchronise on lines the command writes to a
FIFO and on pidfds, never on sleeps; the timeout's clock is injected."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, ConfigError, Session, Tool
from loopwright.builtins import groups, shell_tool
from loopwright.builtins import shell as shell_module
from loopwright.project import load_project
from loopwright.tools import ToolContext, ToolReturn

BOUND = 30.0  # seconds before a wait that should end at once fails the test (never reached)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


async def readable(fd: int) -> None:
    """Wait until `fd` is readable (at most `BOUND` seconds, then `TimeoutError`)."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await asyncio.wait_for(ready, BOUND)
    finally:
        loop.remove_reader(fd)


class Fifo:
    """A named pipe in the workspace that the command writes lines to, read without blocking
    the loop. Opened before the command runs, for reading and writing: the command's writes
    never wait for a reader, and its closing the pipe is never an end of file."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.buffer = b""

    async def line(self) -> str:
        while b"\n" not in self.buffer:
            await readable(self.fd)
            self.buffer += os.read(self.fd, 4096)
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def fifo(ws: Path) -> Iterator[Fifo]:
    pipe = Fifo(ws / "ready")
    yield pipe
    pipe.close()


class Process:
    """A process the test did not start, watched through a pidfd (readable once it exited)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd = os.pidfd_open(pid)
        self.group = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])

    def alive(self) -> bool:
        return not select.select([self.fd], [], [], 0)[0]

    async def gone(self) -> bool:
        """Wait (bounded) until it exited; whether it did."""
        try:
            await readable(self.fd)
        except TimeoutError:
            return False
        return True


Watch = Callable[[int], Process]


@pytest.fixture
def watch() -> Iterator[Watch]:
    """Watch processes by pid; a test that fails leaves none of them running."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("watching a process that is not our child needs pidfds (Linux ≥ 5.3)")
    watched: list[Process] = []

    def start(pid: int) -> Process:
        watched.append(Process(pid))
        return watched[-1]

    yield start
    for process in watched:
        if process.alive():  # through the pidfd: never another process that got the pid
            signal.pidfd_send_signal(process.fd, signal.SIGKILL)
        os.close(process.fd)


class Clock:
    """The shell's timeout clock, injected: a call's timeout expires when the test says so."""

    def __init__(self) -> None:
        self.expired = asyncio.Event()
        self.asked: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self.expired.wait()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    injected = Clock()
    monkeypatch.setattr(shell_module, "_expire", injected.sleep)
    return injected


CTX = ToolContext(session_id="s", tenant="t", agent="a", call_id="c", tool="shell")


async def run(t: Tool, **args: Any) -> ToolReturn:
    """Call the tool the way the loop does: validate the JSON arguments, then call."""
    value = await t.call(t.validate(args), CTX)
    assert isinstance(value, ToolReturn)
    return value


def outputs(events: list[Any]) -> list[tuple[str, bool]]:
    return [(e.content, e.is_error) for e in events if e.type == "tool:output"]


GRANDCHILD = "sleep 300 & echo $! > ready; wait"  # the shell forks a child and waits for it


# ---- what a command sees and what the model reads ------------------------------------------


async def test_a_command_runs_in_the_workspace_through_the_loop(ws: Path) -> None:
    model = scripted(
        {"tool_calls": [call("shell", command="pwd; echo $HOME; ls; echo oops >&2")]}, "Done."
    )
    result = await run_agent(Agent(model=model, tools=[shell_tool(ws)]))
    root = os.path.realpath(ws)
    assert outputs(result.events) == [(f"{root}\n{root}\na.txt\noops\n[exit status 0]", False)]
    assert result.text == "Done." and result.stop_reason == "completed"
    shell = shell_tool(ws)
    assert list(shell.parameters["properties"]) == ["command", "timeout"]
    assert shell.parameters["required"] == ["command"]
    assert "(default 60, at most 600)" in shell.parameters["properties"]["timeout"]["description"]


async def test_a_non_zero_exit_is_an_error_result_with_the_output(ws: Path) -> None:
    model = scripted(
        {"tool_calls": [call("shell", command="echo partial; echo bad >&2; exit 3")]},
        {"tool_calls": [call("shell", "s2", command="true")]},
        {"tool_calls": [call("shell", "s3", command="kill -KILL $$")]},
        "Done.",
    )
    result = await run_agent(Agent(model=model, tools=[shell_tool(ws)]))
    assert outputs(result.events) == [
        ("partial\nbad\n[exit status 3]", True),
        ("[exit status 0]", False),
        ("[killed by signal SIGKILL]", True),
    ]
    statuses = [e.status_text for e in result.events if e.type == "tool:result"]
    assert statuses == ["Error.", "Approved.", "Error."]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"command": "  "}, "command is empty"),
        ({"command": "echo \0"}, "command contains a NUL character"),
        ({"command": "true", "timeout": 0}, "timeout must be more than 0 and at most 600 seconds"),
        (
            {"command": "true", "timeout": 601},
            "timeout must be more than 0 and at most 600 seconds",
        ),
    ],
)
async def test_bad_arguments_are_error_results(
    ws: Path, args: dict[str, Any], message: str
) -> None:
    model = scripted({"tool_calls": [call("shell", **args)]}, "Done.")
    result = await run_agent(Agent(model=model, tools=[shell_tool(ws)]))
    assert outputs(result.events) == [(message, True)]


def test_configuration_is_checked(ws: Path) -> None:
    with pytest.raises(ConfigError, match="workspace root is not a directory"):
        shell_tool(ws / "a.txt")
    with pytest.raises(ConfigError, match="0 < timeout ≤ max_timeout"):
        shell_tool(ws, timeout=700)


# ---- the output cap ------------------------------------------------------------------------


async def test_long_output_keeps_its_head_and_tail_and_says_what_was_cut(ws: Path) -> None:
    shell = shell_tool(ws, max_output=20)
    cut = await run(shell, command="printf 'HEAD-%090d-TAIL' 0")  # 100 bytes
    assert cut.content == "HEAD-00000\n[… 80 bytes cut …]\n00000-TAIL\n[exit status 0]"
    fits = await run(shell, command="printf 'HEAD-%010d-TAIL' 0")  # exactly 20 bytes
    assert fits.content == "HEAD-0000000000-TAIL\n[exit status 0]"
    lines = await run(shell, command="seq 1 1000")  # the mark gets a line of its own
    assert lines.content == "1\n2\n3\n4\n5\n[… 3,873 bytes cut …]\n999\n1000\n[exit status 0]"
    big = await run(shell, command="head -c 1234567 /dev/zero | tr '\\0' x; exit 1")
    assert big.content == f"{'x' * 10}\n[… 1,234,547 bytes cut …]\n{'x' * 10}\n[exit status 1]"
    assert big.is_error
    assert shell.max_output is not None and shell.max_output > 20 + 100  # room for the notes


@pytest.mark.parametrize("chunk", [1, 3, 7, 20, 100])
def test_the_capture_is_the_same_however_the_output_arrives(chunk: int) -> None:
    data = bytes(range(48, 48 + 75)) + b"\n"
    capture = shell_module._Output(20)
    for i in range(0, len(data), chunk):
        capture.add(data[i : i + chunk])
    assert (capture.total, bytes(capture.head), bytes(capture.tail)) == (
        76,
        data[:10],
        data[-10:],
    )
    assert capture.text() == f"{data[:10].decode()}\n[… 56 bytes cut …]\n{data[-10:-1].decode()}"


# ---- the environment -----------------------------------------------------------------------


async def test_no_secret_of_the_parent_reaches_the_command(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-parent-openai",
        "ANTHROPIC_API_KEY": "sk-parent-anthropic",
        "GITHUB_TOKEN": "ghp-parent",
        "AWS_ACCESS_KEY_ID": "AKIA-parent",
        "AWS_SECRET_ACCESS_KEY": "aws-parent",
        "DB_PASSWORD": "hunter2",
        "LOOPWRIGHT_API_TOKEN": "lw-parent",
        "LC_SECRET_TOKEN": "lc-parent",  # an allowed prefix does not let a secret through
        "SOMETHING_ELSE": "not on the list",
    }
    for name in [n for n in os.environ if n.startswith(("LC_", "LANG"))]:
        monkeypatch.delenv(name)  # e.g. LC_CTYPE, set by Python's C-locale coercion
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("TMPDIR", raising=False)
    shell = shell_tool(ws, env={"CI": "1"})
    result = await run(shell, command="env; echo OPENAI=${OPENAI_API_KEY-unset}")
    lines = result.content.splitlines()
    assert lines[-2:] == ["OPENAI=unset", "[exit status 0]"]
    seen = dict(line.split("=", 1) for line in lines[:-2])
    root = os.path.realpath(ws)
    expected = {"PATH": "/usr/bin:/bin", "HOME": root, "PWD": root, "TERM": "dumb"}
    assert {name: seen[name] for name in expected} == expected
    assert (seen["LC_ALL"], seen["NO_COLOR"], seen["CI"]) == ("C.UTF-8", "1", "1")
    assert set(seen) <= {*shell_module.PASSED, *expected, "LC_ALL", "NO_COLOR", "CI"}
    assert not set(secrets) & set(seen)
    assert not any(value in result.content for value in secrets.values())


# ---- stopping the whole group --------------------------------------------------------------


async def test_a_timeout_stops_the_command_and_its_grandchild(
    ws: Path, fifo: Fifo, watch: Watch, clock: Clock
) -> None:
    model = scripted(
        {"tool_calls": [call("shell", command=f"echo started; {GRANDCHILD}", timeout=5)]}, "Done."
    )
    run_ = Session(Agent(model=model, tools=[shell_tool(ws)])).run("go")
    finished = asyncio.ensure_future(drive(run_))
    grandchild = watch(int(await fifo.line()))
    assert grandchild.alive() and grandchild.group != os.getpgid(0)  # a group of its own
    leader = watch(grandchild.group)  # the shell
    assert clock.asked == [5.0]
    clock.expired.set()
    result = await finished
    assert await grandchild.gone() and await leader.gone()
    assert not Path(f"/proc/{leader.pid}").exists()  # reaped, not a zombie
    timed_out = "[timed out after 5s: the command and its processes were stopped]"
    assert outputs(result.events) == [(f"started\n{timed_out}", True)]
    assert result.text == "Done."


async def test_processes_left_running_are_stopped_when_the_command_ends(
    ws: Path, fifo: Fifo, watch: Watch
) -> None:
    result = await run(shell_tool(ws), command="sleep 300 & echo $! > ready; echo left")
    assert result.content == "left\n[exit status 0]" and not result.is_error
    assert await watch(int(await fifo.line())).gone()


async def test_cancelling_the_call_stops_the_grandchild_and_cancels_on(
    ws: Path, fifo: Fifo, watch: Watch
) -> None:
    task = asyncio.ensure_future(run(shell_tool(ws), command=GRANDCHILD))
    grandchild = watch(int(await fifo.line()))
    leader = watch(grandchild.group)
    assert grandchild.alive()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await grandchild.gone() and await leader.gone()
    assert not Path(f"/proc/{leader.pid}").exists()
    assert not groups._STOPPING  # nothing left behind


async def test_cancelling_a_run_stops_the_grandchild(ws: Path, fifo: Fifo, watch: Watch) -> None:
    model = scripted({"tool_calls": [call("shell", command=GRANDCHILD)]}, "Done.")
    session = Session(Agent(model=model, tools=[shell_tool(ws)]))
    finished = asyncio.ensure_future(drive(session.run("go")))
    grandchild = watch(int(await fifo.line()))
    session.cancel()
    result = await finished
    assert await grandchild.gone()
    assert result.stop_reason == "aborted"
    after = [e.type for e in result.events][-7:]
    assert after == [
        "tool:started",
        "tool:interrupted",
        "tool:output",
        "tool:result",
        "step:finished",
        "loop:aborted",
        "done",
    ]
    assert [is_error for _, is_error in outputs(result.events)] == [True]


IGNORES_TERM = textwrap.dedent(
    """\
    trap 'echo term > ready' TERM
    (trap '' TERM; exec sleep 300) &
    echo $! > ready
    while :; do wait; done
    """
)


async def test_what_ignores_sigterm_is_killed_after_the_grace(
    ws: Path, fifo: Fifo, watch: Watch
) -> None:
    task = asyncio.ensure_future(run(shell_tool(ws, kill_grace=0.05), command=IGNORES_TERM))
    grandchild = watch(int(await fifo.line()))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await grandchild.gone()


async def test_a_second_cancellation_kills_at_once(ws: Path, fifo: Fifo, watch: Watch) -> None:
    task = asyncio.ensure_future(run(shell_tool(ws, kill_grace=BOUND * 10), command=IGNORES_TERM))
    grandchild = watch(int(await fifo.line()))
    task.cancel()
    assert await fifo.line() == "term"  # inside the grace, which would outlast the test
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await grandchild.gone()
    await asyncio.gather(*groups._STOPPING)  # the stop goes on to reap the shell
    assert not groups._STOPPING


# ---- agent.yaml and the gate ---------------------------------------------------------------


async def test_agent_yaml_builtins_shell_gives_a_gated_shell(tmp_path: Path) -> None:
    folder = tmp_path / "agents" / "ops"
    (folder / "workspace").mkdir(parents=True)
    (folder / "agent.yaml").write_text(
        "model: scripted:script.yaml\nbuiltins: [shell]\non_deny: continue\n"
    )
    (folder / "rules.yaml").write_text(
        textwrap.dedent(
            """\
            default_decision: allow
            rules:
              - name: no-recursive-delete
                tool: shell
                when: {field: command, op: matches, value: "rm -rf"}
                decision: deny
            """
        )
    )
    (folder / "script.yaml").write_text(
        textwrap.dedent(
            """\
            replies:
              - tool_calls:
                  - {name: shell, id: a, args: {command: "rm -rf ."}}
                  - {name: shell, id: b, args: {command: "echo hi > note.txt; cat note.txt"}}
              - text: Done.
            """
        )
    )
    agent = load_project(tmp_path).agent("ops")
    assert [t.name for t in agent.tools] == ["shell"]
    result = await drive(Session(agent).run("go"))
    decisions = [(e.decision, e.reason) for e in result.events if e.type == "actauth:decision"]
    assert decisions[0] == ("deny", "matched rule 'no-recursive-delete'")
    assert decisions[1][0] == "allow"
    output = {e.id: e for e in result.events if e.type == "tool:output"}
    assert (output["b"].content, output["b"].is_error) == ("hi\n[exit status 0]", False)
    assert (folder / "workspace" / "note.txt").read_text() == "hi\n"
