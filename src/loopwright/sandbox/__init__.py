"""A sandbox for what runs commands (docs/sandbox.md): the `shell` built-in and stdio MCP
servers run under bubblewrap, the file built-ins in the same workspace.

`Sandbox` is the policy, a value: the workspace (a path, or `per_session`: a fresh one per
session under `workspaces`), the network (`none`, `all` or an allow-list of hosts, enforced
by a proxy: `proxy.NetworkProxy`), the resource `Limits`, the host
paths bound read-only besides the system, and the environment passed in (nothing else is).
`Agent(sandbox=Sandbox(...))`, `sandbox:` in agent.yaml or `[sandbox]` in loopwright.toml
turn it on; `bwrap.command` builds the command line, `bwrap.require` checks bubblewrap (fail
closed), `apply.sandboxed` gives an agent's tools the sandbox.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError
from .network import hosts

if TYPE_CHECKING:
    from .proxy import NetworkProxy

__all__ = ["PER_SESSION", "Limits", "Sandbox"]

PER_SESSION = "per_session"
"""`workspace: per_session`: each session works in `workspaces/<session id>`."""
NOBODY = 65534
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Resource limits of every process in the sandbox (setrlimit, through `prlimit`)."""

    cpu_seconds: int = 60
    """CPU time of one process (RLIMIT_CPU): past it, SIGXCPU then SIGKILL."""
    memory_mb: int = 1024
    """Address space of one process (RLIMIT_AS): allocations past it fail."""
    processes: int = 256
    """Processes of the sandbox's user (RLIMIT_NPROC; see docs/sandbox.md for root)."""
    file_size_mb: int = 512
    """Largest file a process may write (RLIMIT_FSIZE)."""

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_mb", "processes", "file_size_mb"):
            if getattr(self, name) < 1:
                raise ConfigError(f"sandbox limits: {name} must be at least 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sandbox:
    """How commands are contained (see the module and docs/sandbox.md)."""

    workspace: str | Path = PER_SESSION
    """The directory commands may write (bound read-write at the same path), or `per_session`."""
    workspaces: str | Path = ".loopwright/workspaces"
    """Where `per_session` workspaces are made, one directory per session id."""
    network: Literal["none", "all"] | tuple[str, ...] = "none"
    """`none`: a network namespace of its own (only its loopback); `all`: the host's network;
    a list of hosts (`host`, `host:port`, `*.example.com`): no route out but an HTTP(S) proxy
    that lets only those through (docs/sandbox.md)."""
    limits: Limits = field(default_factory=Limits)
    read_only: tuple[str, ...] = ()
    """Host paths bound read-only besides the system (/usr, /bin, /lib*, /etc): e.g. a venv."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables passed in, besides PATH, HOME, PWD, LANG, TERM (nothing else is)."""
    user: int = NOBODY
    """When the server runs as root: the uid (and gid) commands run as, so that the process
    limit holds (the kernel never applies it to root)."""
    bwrap: str = "bwrap"
    """The bubblewrap executable (a name looked up on PATH, or a path)."""
    proxy: NetworkProxy | None = field(default=None, init=False, repr=False, compare=False)
    """The proxy of an allow-list: the agent the sandbox is given to makes it (sandbox.apply)."""

    def __post_init__(self) -> None:
        if isinstance(self.network, str) and self.network not in ("none", "all"):
            raise ConfigError(f"sandbox network: expected 'none' or 'all', got {self.network!r}")
        if not isinstance(self.network, str):
            object.__setattr__(self, "network", hosts(self.network))
        object.__setattr__(self, "read_only", tuple(str(p) for p in self.read_only))
        object.__setattr__(self, "env", dict(self.env))

    @classmethod
    def parse(cls, values: Mapping[str, Any], base: Path | None = None) -> Sandbox:
        """A sandbox from agent.yaml's `sandbox:` or loopwright.toml's `[sandbox]` (unknown keys
        are errors); relative paths are relative to `base`."""
        data = dict(values)
        known = {"workspace", "workspaces", "network", "limits", "read_only", "env", "user"}
        known.add("bwrap")
        if unknown := sorted(set(data) - known):
            raise ConfigError(f"sandbox: unknown key {unknown[0]!r} (valid: {sorted(known)})")
        limits = data.pop("limits", None) or {}
        if unknown := sorted(set(limits) - set(Limits.__dataclass_fields__)):
            raise ConfigError(f"sandbox limits: unknown key {unknown[0]!r}")
        for key in ("workspace", "workspaces"):
            if key in data and base is not None and data[key] != PER_SESSION:
                data[key] = base / str(data[key])
        if "read_only" in data:
            data["read_only"] = tuple(str(p) for p in data["read_only"])
        if base is not None and "workspaces" not in data:
            data["workspaces"] = base / "workspaces"
        return cls(limits=Limits(**limits), **data)

    def base(self) -> str:
        """The workspace, or where the per-session ones are made (made when missing)."""
        per_session = self.workspace == PER_SESSION
        return _made(Path(self.workspaces if per_session else self.workspace), self.user)

    def workspace_for(self, session_id: str) -> str:
        """The real path of the workspace of `session_id`, made (for the sandbox's user) when
        missing."""
        if self.workspace == PER_SESSION:
            path = Path(self.workspaces) / (_SAFE.sub("_", session_id) or "_")
        else:
            path = Path(self.workspace)
        return _made(path, self.user)


def _made(path: Path, user: int) -> str:
    """The real path of the directory `path`, made (for `user`, when we are root) if missing."""
    if not path.is_dir():
        path.mkdir(parents=True, mode=0o700)
        if os.geteuid() == 0:
            os.chown(path, user, user)
    return os.path.realpath(path)
