"""`loopwright dev`: the project is loaded again whenever one of its files changes (agents,
tools, rules, skills, loopwright.toml, .env), in this process, without dropping connections.
A version that fails to load leaves the previous agents serving and says why. Runs already
going keep the agent they started with. Modules that tools import from elsewhere are not
re-imported: restart for those."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from ..project import load_project
from .settings import ServerSettings
from .state import State

IGNORED_DIRS = frozenset(
    {".loopwright", ".git", "__pycache__", "node_modules", ".venv", "workspace"}
)


def relevant(path: str, root: Path) -> bool:
    """Whether a change to `path` can change the project (not the store, caches or a
    workspace the agents write to)."""
    try:
        parts = Path(path).resolve().relative_to(root.resolve()).parts
    except ValueError:
        return False
    if not parts or any(p in IGNORED_DIRS or p.startswith(".") for p in parts[:-1]):
        return False
    name = parts[-1]
    if name.endswith(("~", ".swp", ".pyc", "-journal", "-wal", "-shm", ".db")):
        return False
    return name in ("loopwright.toml", ".env") or parts[0] == "agents"


def reload(state: State, root: Path, say: Callable[[str], None]) -> bool:
    """Load the project again and serve it; on a configuration error keep the old one."""
    try:
        project = load_project(root)
        settings = ServerSettings.from_project(
            project.settings, host=state.settings.host, port=state.settings.port
        )
    except ConfigError as exc:
        say(f"reload failed, still serving the previous version: {exc}")
        return False
    state.serve(project, settings)
    say(f"reloaded: {len(project.agents)} agent(s): {', '.join(sorted(project.agents))}")
    return True


async def watch(
    state: State,
    root: Path,
    stop: asyncio.Event,
    say: Callable[[str], None],
    *,
    debounce: int = 300,
) -> None:
    """Reload on every relevant change until `stop` is set."""
    from watchfiles import awatch

    async for changes in awatch(
        root,
        watch_filter=lambda _change, path: relevant(path, root),
        stop_event=stop,
        debounce=debounce,
        step=50,
    ):
        names = sorted({Path(p).name for _, p in changes})
        say(f"changed: {', '.join(names)}")
        reload(state, root, say)
