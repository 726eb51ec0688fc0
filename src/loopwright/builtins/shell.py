"""The shell tool (SPEC §3.6): run one command with `/bin/sh -c` in the workspace directory.

The command runs in a process group of its own (a new session), with stdin closed, stdout and
stderr merged into one pipe, and an environment built from an allow-list (no provider keys,
tokens or passwords of the parent). Its output is capped: the head and the tail are kept and
the model is told how many bytes were cut between them. When the command ends, times out or the
call is cancelled, the whole group is stopped: SIGTERM, then SIGKILL after a short grace, and the
shell is reaped. Nothing it started outlives the call, except a process that left the group on
purpose (`setsid`): containing those is the sandbox's job (docs/shell.md), not this tool's.

With a `Sandbox` (`Agent(sandbox=...)`, docs/sandbox.md) the command runs under bubblewrap in
the sandbox's workspace instead: the group's leader is bwrap, and stopping it kills the
sandbox's whole pid namespace, `setsid` children too.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ToolError
from ..sandbox import Sandbox
from ..tools import Tool, ToolContext, ToolReturn, tool
from .groups import Group, stop

__all__ = ["shell_tool"]

PASSED = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "TMPDIR"})
"""Variables of the parent the command sees (and every `LC_*`), unless they look secret."""
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
_expire = asyncio.sleep  # the timeout's clock (tests inject their own)


def command_env(root: str, parent: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The environment a command runs with: allowed names of `parent`, HOME and PWD at the
    workspace (tools do not find the user's dotfiles and stored credentials), no terminal, then
    the deployer's `extra` as given."""
    env = {
        name: value
        for name, value in parent.items()
        if (name in PASSED or name.startswith("LC_")) and not _SECRET.search(name)
    }
    env.setdefault("PATH", os.defpath)
    env.update(HOME=root, PWD=root, TERM="dumb", NO_COLOR="1")
    env.update(extra)
    return env


class _Output:
    """What a command printed, in bounded memory: the first and the last bytes, and a count."""

    def __init__(self, cap: int) -> None:
        self.head_cap, self.tail_cap = cap - cap // 2, cap // 2
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if (excess := len(self.tail) - self.tail_cap) > 0:
            del self.tail[:excess]

    def text(self) -> str:
        head, tail = self.head.decode(errors="replace"), self.tail.decode(errors="replace")
        if cut := self.total - len(self.head) - len(self.tail):  # the mark on a line of its own
            before = "" if head.endswith("\n") else "\n"
            after = "" if tail.startswith("\n") else "\n"
            head += f"{before}[… {cut:,} bytes cut …]{after}"
        return (head + tail).removesuffix("\n")


class _Command(Group):
    """One running command: its shell process (the group's leader), and the pipe it writes to."""

    def __init__(self, proc: asyncio.subprocess.Process, fd: int, output: _Output) -> None:
        super().__init__(proc)
        self.fd, self.output = fd, output
        self.eof = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_reader(fd, self._readable)

    @classmethod
    async def start(cls, argv: list[str], root: str, env: dict[str, str], cap: int) -> _Command:
        read_fd, write_fd = os.pipe()
        try:
            os.set_blocking(read_fd, False)
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                cwd=root,
                env=env,
                start_new_session=True,  # its own session and process group: pgid == pid
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the command holds the only write end: EOF when all of it exits
        return cls(proc, read_fd, _Output(cap))

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.output.add(data)
        else:
            self._close_reader()

    def _close_reader(self) -> None:
        if not self.eof.done():
            asyncio.get_running_loop().remove_reader(self.fd)
            os.close(self.fd)
            self.eof.set_result(None)

    # stopping (`Group.stop`): the shell exits and the pipe closes within the grace; once the
    # shell is reaped, what is left in the pipe is read (at most `grace` more: a process that
    # left the group may hold it open)
    def _done_waits(self) -> list[asyncio.Future[Any]]:
        return [self.exited, self.eof]

    async def _after_kill(self, grace: float) -> None:
        await self.exited  # (no pipes of asyncio's: the shell's exit alone)
        await asyncio.wait([self.eof], timeout=grace)

    def _stopped(self) -> None:
        self._close_reader()


async def run_command(
    command: str | list[str],
    root: str,
    env: dict[str, str],
    *,
    timeout: float,
    cap: int,
    grace: float,
) -> tuple[int | None, str]:
    """Run `command` (a shell command line, or an argv) and stop its group; the exit status
    (None when it timed out) and output.

    Cancelling the caller stops the group too (SIGTERM, then SIGKILL after `grace`; a second
    cancellation sends SIGKILL at once), then the cancellation goes on."""
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else command
    cmd = await _Command.start(argv, root, env, cap)
    try:
        timer = asyncio.ensure_future(_expire(timeout))
        try:
            await asyncio.wait([cmd.exited, timer], return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        done = cmd.exited.done()
    finally:
        await stop(cmd, grace)
    return (cmd.proc.returncode if done else None), cmd.output.text()


def _status(code: int | None, limit: float) -> str:
    if code is None:
        return f"[timed out after {limit:g}s: the command and its processes were stopped]"
    if code < 0:
        try:
            return f"[killed by signal {signal.Signals(-code).name}]"
        except ValueError:
            return f"[killed by signal {-code}]"
    return f"[exit status {code}]"


def shell_tool(
    root: str | Path,
    *,
    timeout: float = 60.0,
    max_timeout: float = 600.0,
    max_output: int = 30_000,
    kill_grace: float = 2.0,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> Tool:
    """A `shell` tool running commands in `root` (see the module docstring and docs/shell.md).

    `timeout` is the default the model may raise up to `max_timeout` (seconds; the agent's
    `tool_timeout` still bounds a call); `max_output` caps the bytes of output kept (half head,
    half tail); `kill_grace` is the time between SIGTERM and SIGKILL; `env` adds variables, as
    given, to the filtered environment (put no secrets there: the model reads what commands
    print); `sandbox` runs each command under bubblewrap in the sandbox's workspace instead of
    `root` (an agent with a sandbox gives it to its shell tools)."""
    real = os.path.realpath(root)
    if sandbox is None and not os.path.isdir(real):
        raise ConfigError(f"workspace root is not a directory: {root}")
    if not 0 < timeout <= max_timeout or max_output < 2 or kill_grace < 0:
        raise ConfigError("shell: need 0 < timeout ≤ max_timeout, max_output ≥ 2, kill_grace ≥ 0")
    extra = dict(env or {})

    async def shell(command: str, ctx: ToolContext, timeout: float = timeout) -> ToolReturn:
        """Run a shell command (/bin/sh -c) in the workspace directory and return its output
        (stdout and stderr together) and exit status. Stdin is closed: nothing can prompt.
        Long output keeps its start and its end. Processes the command leaves running are
        stopped when it ends.

        Args:
            command: The command line, e.g. "ls -la" or "python3 -m pytest -q 2>&1 | tail".
            timeout: Seconds before the command is stopped (default DEFAULT, at most MAX).
        """
        if not command.strip():
            raise ToolError("command is empty")
        if "\0" in command:
            raise ToolError("command contains a NUL character")
        if not 0 < timeout <= max_timeout:
            raise ToolError(f"timeout must be more than 0 and at most {max_timeout:g} seconds")
        left = ctx.time_left()
        if left is not None:  # stop it ourselves, with its output, before the loop cancels it
            timeout = min(timeout, left - min(kill_grace + 0.5, left / 2))
        argv: str | list[str] = command
        where, env_of = real, command_env(real, os.environ, extra)
        if sandbox is not None:  # bwrap itself gets an empty environment; the command, the policy's
            from ..sandbox.bwrap import SandboxUnavailable, wrap

            try:
                where = sandbox.workspace_for(ctx.session_id)
                argv, env_of = wrap(sandbox, where, ["/bin/sh", "-c", command], extra), {}
                if sandbox.proxy is not None:  # (its owner started it with the run, or now)
                    await sandbox.proxy.enter()
            except (SandboxUnavailable, OSError) as exc:  # fail closed: bubblewrap went missing
                return ToolReturn(content=str(exc), is_error=True)
        code, output = await run_command(
            argv, where, env_of, timeout=timeout, cap=max_output, grace=kill_grace
        )
        content = f"{output}\n{_status(code, timeout)}" if output else _status(code, timeout)
        return ToolReturn(content=content, is_error=code != 0)

    doc = shell.__doc__ or ""
    shell.__doc__ = doc.replace("DEFAULT", f"{timeout:g}").replace("MAX", f"{max_timeout:g}")
    made = tool(name="shell", max_output=max_output + 1_000)(shell)

    def in_sandbox(policy: Sandbox) -> Tool:  # (`Agent(sandbox=...)`: sandbox.apply)
        return shell_tool(
            root,
            timeout=timeout,
            max_timeout=max_timeout,
            max_output=max_output,
            kill_grace=kill_grace,
            env=env,
            sandbox=policy,
        )

    made.fn.__sandbox__ = in_sandbox  # type: ignore[attr-defined]
    return made
