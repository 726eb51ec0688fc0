"""The shell built-in under a real bubblewrap sandbox (docs/sandbox.md), driven through the
loop: the server's environment is invisible (env and /proc), nothing outside the workspace can
be written, the network is the sandbox's own unless allowed, a `setsid` child dies with its
call, a fork bomb and a memory hog are stopped by the limits (error results), and each session
works in a workspace of its own, the file built-ins too. Synchronised on FIFOs and pidfds."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import call, drive, run_agent, scripted
from loopwright import Agent, Session
from loopwright.builtins import shell_tool
from loopwright.builtins.files import workspace_tools
from loopwright.sandbox import Limits, Sandbox
from sandbox_required import needs
from test_builtin_shell import Fifo, Process, outputs, readable

pytestmark = needs("bwrap")
SECRET = "hunter2-sandbox-secret"


def agent(sandbox: Sandbox, *replies: Any, ws: Path | None = None) -> Agent:
    return Agent(model=scripted(*replies), tools=[shell_tool(ws or "/")], sandbox=sandbox)


async def shell_once(sandbox: Sandbox, command: str, **kwargs: Any) -> tuple[str, bool]:
    """One shell call through the loop; its output and whether it is an error."""
    model = ({"tool_calls": [call("shell", command=command, **kwargs)]}, "Done.")
    result = await run_agent(agent(sandbox, *model))
    [output] = outputs(result.events)
    return output


async def test_the_server_environment_is_invisible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPWRIGHT_TEST_PLAIN", SECRET)  # a name no filter would catch
    ws = tmp_path / "ws"
    sandbox = Sandbox(workspace=ws, env={"GREETING": "hi"})
    command = (
        "env | sort; echo ---; ls /proc | grep -E '^[0-9]+$' | wc -l; "
        "cat /proc/[0-9]*/environ /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n' | sort -u"
    )
    text, is_error = await shell_once(sandbox, command)
    real = os.path.realpath(ws)
    env = ["GREETING=hi", f"HOME={real}", "LANG=C.UTF-8", "NO_COLOR=1"]
    env += ["PATH=/usr/local/bin:/usr/bin:/bin", f"PWD={real}", "TERM=dumb"]
    lines = text.splitlines()
    assert lines[: len(env) + 1] == [*env, "---"]
    assert SECRET not in text and not is_error
    assert int(lines[len(env) + 1]) <= 6  # bwrap's init, the shell and the pipeline: no server
    assert set(lines[len(env) + 2 : -1]) <= {*env, ""}  # /proc shows only the sandbox's own


async def test_nothing_outside_the_workspace_can_be_written(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    outside = tmp_path / "outside.txt"
    command = (
        f"echo a > {outside}; echo b > /etc/lw-sandbox; echo c > /usr/lw-sandbox; "
        "echo f > /root/lw-sandbox; "
        "echo d > /tmp/private && cat /tmp/private; echo e > inside.txt && echo wrote"
    )
    text, _ = await shell_once(Sandbox(workspace=ws), command)
    assert text.splitlines() == [
        f"/bin/sh: 1: cannot create {outside}: Permission denied",
        "/bin/sh: 1: cannot create /etc/lw-sandbox: Read-only file system",
        "/bin/sh: 1: cannot create /usr/lw-sandbox: Read-only file system",
        "/bin/sh: 1: cannot create /root/lw-sandbox: Directory nonexistent",
        "d",
        "wrote",
        "[exit status 0]",
    ]
    assert not outside.exists() and not Path("/etc/lw-sandbox").exists()
    assert not Path("/root/lw-sandbox").exists()
    assert not Path("/tmp/private").exists()  # the sandbox's /tmp is its own
    assert (ws / "inside.txt").read_text() == "e\n"


@pytest.mark.parametrize(("network", "reached"), [("none", False), ("all", True)])
async def test_the_network_is_reachable_only_when_allowed(
    tmp_path: Path, network: Any, reached: bool
) -> None:
    connected = asyncio.Event()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = (
        'python3 -c \'import socket\ntry:\n socket.create_connection(("127.0.0.1", '
        f'{port}), 10)\n print("connected")\nexcept OSError as e:\n print(type(e).__name__)\''
    )
    async with server:
        text, _ = await shell_once(Sandbox(workspace=tmp_path / "ws", network=network), probe)
        if reached:
            await asyncio.wait_for(connected.wait(), 30)
    said = "connected" if reached else "ConnectionRefusedError"
    assert text == f"{said}\n[exit status 0]"
    assert connected.is_set() is reached


def sleeper(*argvs: list[str]) -> Process | None:
    """The host's process running one of `argvs` (the sandbox shows it another pid)."""
    wanted = [("\0".join(argv) + "\0").encode() for argv in argvs]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() in wanted:
                    return Process(int(entry.name))
            except OSError:
                continue
    return None


async def test_a_setsid_child_dies_with_its_call(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o777)
    ready, go = Fifo(ws / "ready"), Fifo(ws / "go")
    os.chmod(ws / "ready", 0o666)
    os.chmod(ws / "go", 0o666)
    inner = "echo up > ready; exec sleep 300.25"
    started = f"setsid sh -c '{inner}' >/dev/null 2>&1 &"
    command = f"{started} read x < go; echo ended"
    finished = asyncio.ensure_future(shell_once(Sandbox(workspace=ws), command))
    try:
        assert await ready.line() == "up"
        child = sleeper(["sh", "-c", inner], ["sleep", "300.25"])  # before or after its exec
        assert child is not None and child.alive()
        assert child.group != os.getpgid(0)  # it left every group we know of
        os.write(go.fd, b"go\n")
        assert await finished == ("ended\n[exit status 0]", False)
        assert await child.gone()
    finally:
        ready.close()
        go.close()


async def test_a_fork_bomb_is_stopped_by_the_process_limit(tmp_path: Path) -> None:
    sandbox = Sandbox(workspace=tmp_path / "ws", limits=Limits(processes=16))
    bomb = "python3 -c 'import os\nwhile True: os.fork()' 2>&1 | grep -c BlockingIOError"
    text, is_error = await shell_once(sandbox, f"{bomb}; exit 1")
    count, status = text.splitlines()
    assert int(count) >= 1 and status == "[exit status 1]" and is_error  # forks were refused


async def test_a_memory_hog_is_stopped_by_the_memory_limit(tmp_path: Path) -> None:
    sandbox = Sandbox(workspace=tmp_path / "ws", limits=Limits(memory_mb=200))
    hog = "python3 -c 'b = bytearray(400 * 1024 * 1024); print(\"allocated\")'"
    text, is_error = await shell_once(sandbox, hog)
    assert text.splitlines()[-2:] == ["MemoryError", "[exit status 1]"] and is_error
    assert "allocated" not in text


async def test_each_session_has_a_workspace_of_its_own_files_too(tmp_path: Path) -> None:
    sandbox = Sandbox(workspaces=tmp_path / "spaces")
    tools = [shell_tool("/"), *workspace_tools(tmp_path)]

    def replies(word: str) -> list[Any]:
        return [
            {"tool_calls": [call("shell", command=f"ls; echo {word} > mine.txt; pwd")]},
            {"tool_calls": [call("read_file", path="mine.txt")]},
            {"tool_calls": [call("write_file", path="note.txt", content=word)]},
            "Done.",
        ]

    texts: list[list[tuple[str, bool]]] = []
    for sid, word in (("one", "first"), ("two", "second")):
        model = scripted(*replies(word))
        run = Session(Agent(model=model, tools=tools, sandbox=sandbox), session_id=sid).run("go")
        texts.append(outputs((await drive(run)).events))
    for (sid, word), seen in zip((("one", "first"), ("two", "second")), texts, strict=True):
        root = os.path.realpath(tmp_path / "spaces" / sid)
        assert seen[0] == (f"{root}\n[exit status 0]", False)  # nothing of the other session
        assert seen[1] == (f"     1\t{word}", False)
        assert sorted(os.listdir(root)) == ["mine.txt", "note.txt"]
        assert (Path(root) / "note.txt").read_text() == word
    assert not (tmp_path / "mine.txt").exists()  # the tools' own root is not used


_ = readable  # (the FIFO helpers' wait)
