"""The bubblewrap command line of a sandboxed command, and the check that bubblewrap works.

    bwrap --ro-bind /usr /usr (and /bin, /sbin, /lib*, /etc, the policy's read-only paths)
          --tmpfs /tmp --dev /dev --bind WORKSPACE WORKSPACE --chdir WORKSPACE
          --unshare-pid --proc /proc [--unshare-net] --unshare-ipc --unshare-uts
          [--dir /run --bind PROXY_SOCKET /run/lw-proxy.sock --ro-bind forward.py /run/lw-forward.py]
          --die-with-parent --new-session --clearenv --setenv NAME VALUE ...
          -- prlimit --cpu= --as= --nproc= --fsize= -- [setpriv --reuid= --regid= --clear-groups]
          [python3 -I -S /run/lw-forward.py 3128 /run/lw-proxy.sock] COMMAND...

With an allow-list of hosts the network is unshared as with `none`, the proxy's socket is bound
in, and the forwarder (forward.py) listens on the sandbox's 127.0.0.1:3128 and becomes the
command; HTTP_PROXY, HTTPS_PROXY (and their lower-case forms) point at it.

The command is pid 2 of a pid namespace whose pid 1 is bwrap's own init: when the outer bwrap
dies (its call stopped it, or its MCP server was stopped), `--die-with-parent` kills that init
and the kernel kills every process of the namespace, `setsid` ones too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from ..errors import ConfigError
from . import Sandbox
from .network import split

FIX = "install bubblewrap (apt-get install bubblewrap) or remove the sandbox"
PATH = "/usr/local/bin:/usr/bin:/bin"
SOCKET, FORWARDER, PORT = "/run/lw-proxy.sock", "/run/lw-forward.py", 3128
"""Where the proxy's socket and the forwarder are inside the sandbox, the forwarder's port."""
LOOPBACK = ("localhost", "127.0.0.1", "::1")
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
    found = require(sandbox)
    proxy = sandbox.proxy.path if sandbox.proxy is not None else None
    return command(sandbox, workspace, argv, env, bwrap=found, proxy=proxy)


@cache
def _forwarder() -> list[str]:
    python = shutil.which("python3", path=PATH)
    if python is None:
        fix = "install python3 (apt-get install python3-minimal) or use network: none or all"
        raise SandboxUnavailable(f"sandbox: the network allow-list needs python3 in {PATH}: {fix}")
    return [python, "-I", "-S", FORWARDER, str(PORT), SOCKET]


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


def environment(
    sandbox: Sandbox, workspace: str, extra: Mapping[str, str], proxied: bool = False
) -> dict[str, str]:
    """Everything a sandboxed process finds in its environment."""
    env = {"PATH": PATH, "HOME": workspace, "PWD": workspace, "LANG": "C.UTF-8"}
    env.update(TERM="dumb", NO_COLOR="1")
    if proxied:  # a loopback name the list allows means the host's: it goes through the proxy
        url, named = f"http://127.0.0.1:{PORT}", {split(e)[0].strip("[]") for e in sandbox.network}
        env.update(HTTP_PROXY=url, HTTPS_PROXY=url, http_proxy=url, https_proxy=url)
        direct = ",".join(h for h in LOOPBACK if h not in named)
        env.update(NO_PROXY=direct, no_proxy=direct)
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
    proxy: str | None = None,
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
    if sandbox.network != "all":
        args.append("--unshare-net")
    proxied = proxy is not None and sandbox.network != "all"
    if proxied:
        args += ["--perms", "0755", "--dir", "/run", "--bind", str(proxy), SOCKET]
        args += ["--ro-bind", str(Path(__file__).with_name("forward.py")), FORWARDER]
    args += ["--die-with-parent", "--new-session", "--clearenv"]
    for name, value in environment(sandbox, workspace, extra_env, proxied).items():
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
    return [*args, *(_forwarder() if proxied else ()), *argv]


def _owner(workspace: str, default: int) -> int:
    """The owner of the workspace when it is not root (its files stay theirs), else `default`."""
    try:
        owner = os.stat(workspace).st_uid
    except OSError:
        return default
    return owner or default
