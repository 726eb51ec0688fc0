"""The bubblewrap command line of a sandboxed command, and the check that bubblewrap works.

    bwrap --ro-bind /usr /usr (and /bin, /sbin, /lib*, /etc, the policy's read-only paths)
          --tmpfs /tmp --dev /dev --bind WORKSPACE WORKSPACE --chdir WORKSPACE
          --unshare-pid --proc /proc [--unshare-net] --unshare-ipc --unshare-uts
          --die-with-parent --new-session --clearenv --setenv NAME VALUE ...
          -- prlimit --cpu= --as= --nproc= --fsize= -- [setpriv --reuid= --regid= --clear-groups]
          COMMAND...

The command is pid 2 of a pid namespace whose pid 1 is bwrap's own init: when the outer bwrap
dies (its call stopped it, or its MCP server was stopped), `--die-with-parent` kills that init
and the kernel kills every process of the namespace, `setsid` ones too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from ..errors import ConfigError
from . import Sandbox

FIX = "install bubblewrap (apt-get install bubblewrap) or remove the sandbox"
PATH = "/usr/local/bin:/usr/bin:/bin"
_checked: dict[str, str] = {}  # executable → its path, once it ran a probe


class SandboxUnavailable(ConfigError):
    """bubblewrap is missing or cannot start: a sandboxed agent must not run without it."""


def require(sandbox: Sandbox) -> str:
    """The path of the sandbox's bwrap, once it ran a probe here (cached), or
    `SandboxUnavailable` naming the fix."""
    found = shutil.which(sandbox.bwrap)
    if found is None:
        raise SandboxUnavailable(f"sandbox: bubblewrap ({sandbox.bwrap!r}) not found: {FIX}")
    if _checked.get(sandbox.bwrap) == found:
        return found
    probe = command(sandbox, "/", ["/bin/true"], {}, bwrap=found, workspace_bind=False)
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"sandbox: bubblewrap cannot start ({exc}): {FIX}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
        raise SandboxUnavailable(f"sandbox: the bubblewrap check failed: {said}: {FIX}")
    _checked[sandbox.bwrap] = found
    return found


def wrap(sandbox: Sandbox, workspace: str, argv: list[str], env: Mapping[str, str]) -> list[str]:
    """`argv` under the sandbox, once bubblewrap is known to work (`SandboxUnavailable` if not)."""
    return command(sandbox, workspace, argv, env, bwrap=require(sandbox))


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return [*args, "--ro-bind", "/etc", "/etc"]


SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc")


def _parents(paths: list[str]) -> list[str]:
    """The directories above the bound paths, made traversable (bwrap makes them 0700): the
    sandbox's user reaches what is bound by its absolute path."""
    made: list[str] = []
    for path in paths:
        parent = os.path.dirname(os.path.abspath(path))
        chain: list[str] = []
        while parent not in ("/", "/tmp") and not parent.startswith(SYSTEM):
            chain.append(parent)
            parent = os.path.dirname(parent)
        made += [p for p in reversed(chain) if p not in made and p not in paths]
    return [arg for p in made for arg in ("--perms", "0755", "--dir", p)]


def environment(sandbox: Sandbox, workspace: str, extra: Mapping[str, str]) -> dict[str, str]:
    """Everything a sandboxed process finds in its environment."""
    env = {"PATH": PATH, "HOME": workspace, "PWD": workspace, "LANG": "C.UTF-8"}
    env.update(TERM="dumb", NO_COLOR="1")
    env.update(sandbox.env)
    env.update(extra)
    return env


def command(
    sandbox: Sandbox,
    workspace: str,
    argv: list[str],
    extra_env: Mapping[str, str],
    *,
    bwrap: str | None = None,
    workspace_bind: bool = True,
) -> list[str]:
    """The full command line running `argv` in the sandbox, in `workspace` (see the module)."""
    args = [bwrap or sandbox.bwrap, *_system_binds(), "--perms", "1777", "--tmpfs", "/tmp"]
    args += ["--dev", "/dev"]
    bound = [*sandbox.read_only, *([workspace] if workspace_bind else [])]
    args += _parents(bound)
    for path in sandbox.read_only:
        args += ["--ro-bind", path, path]
    if workspace_bind:
        args += ["--bind", workspace, workspace]
    args += ["--chdir", workspace]
    args += ["--unshare-pid", "--proc", "/proc", "--unshare-ipc", "--unshare-uts"]
    if sandbox.network == "none":
        args.append("--unshare-net")
    args += ["--die-with-parent", "--new-session", "--clearenv"]
    for name, value in environment(sandbox, workspace, extra_env).items():
        args += ["--setenv", name, value]
    limits = sandbox.limits
    mib = 1024 * 1024
    args += [
        "--",
        "/usr/bin/prlimit",
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_mb * mib}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_size_mb * mib}",
        "--",
    ]
    if os.geteuid() == 0:  # the kernel never limits root's processes: run as another user
        uid = _owner(workspace, sandbox.user)
        args += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*args, *argv]


def _owner(workspace: str, default: int) -> int:
    """The owner of the workspace when it is not root (its files stay theirs), else `default`."""
    try:
        owner = os.stat(workspace).st_uid
    except OSError:
        return default
    return owner or default
