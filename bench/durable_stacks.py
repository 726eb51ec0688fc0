"""The durable stacks bench/durable.py measures: one small adapter class each, in `STACKS`.

An adapter is made with `(directory, agent)` — a fresh, empty directory of its own and the
benchmark's agent — and is used as:

    await stack.open()                        # the store (log) in `directory`
    await stack.append_turn(id, text)         # building: one turn through the store; it may keep
                                              #   a session open between calls, as a chat does
    await stack.last_seq(id)                  # the session's last committed seq (0: none yet)
    await stack.message(id, text)             # a new message as the stack's interface sends it:
                                              #   the session opened from the store, then a turn
                                              #   to its `done`; returns (open s, total s, text)
    stack.app()                               # an ASGI app serving the agent, or None (no HTTP)
    await stack.close()

Everything runs under tenant "default".
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loopwright import Agent
from loopwright.errors import UnknownSession

TENANT = "default"


class RuntimeStack:
    """The new stack: `store.sqlite_log.SQLiteLog` (the `EventLog` of store/log.py, opened with
    `open_log`) under the `loopwright.runtime.Runtime` service. A message is `Runtime.send`
    (which opens the session with `Runtime.open`, timed apart) and the run's `done`. Building
    keeps one session from `Runtime.open` and runs its turns, as a chat does. The server is
    `create_app` over the same runtime."""

    name = "runtime"

    ttl = 30.0
    """The runs' lease (seconds): bench/durable_cg.py lengthens it, as a run under callgrind is
    ~50× slower and its lease would lapse before the heartbeat renews it."""

    def __init__(self, directory: Path, agent: Agent) -> None:
        self.directory, self.agent = directory, agent
        self.building: dict[str, Any] = {}
        self.opened = 0.0

    async def open(self) -> None:
        from loopwright.runtime import Runtime
        from loopwright.store.opening import open_log

        self.log = await open_log(self.directory / "loopwright.db")
        self.runtime = Runtime({self.agent.name: self.agent}, self.log, ttl=self.ttl)
        self.runtime.open = self._timed(self.runtime.open)  # type: ignore[method-assign]

    def _timed(self, open_: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def timed(key: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await open_(key)
            finally:
                self.opened = time.perf_counter() - t0

        return timed

    def key(self, session_id: str) -> Any:
        from loopwright.store.log import SessionKey

        return SessionKey(TENANT, self.agent.name, session_id)

    async def message(self, session_id: str, text: str) -> tuple[float, float, str]:
        self.opened = 0.0  # (a session kept from its last run is not opened again)
        t0 = time.perf_counter()
        live = await self.runtime.send(TENANT, self.agent.name, session_id, text)
        done = await live.wait()
        total = time.perf_counter() - t0
        if done is None:
            raise RuntimeError(f"the run ended without its done: {live.failure!r}")
        return self.opened, total, done.text

    async def append_turn(self, session_id: str, text: str) -> None:
        if session_id not in self.building:
            self.building[session_id] = await self.runtime.open(self.key(session_id))
        session = self.building[session_id]
        await session.run(text).result()

    async def last_seq(self, session_id: str) -> int:
        try:
            return int((await self.log.session(self.key(session_id))).last_seq)
        except UnknownSession:
            return 0

    def app(self) -> Any:
        from loopwright.project import Project
        from loopwright.server import create_app

        project = Project(root=self.directory, agents={self.agent.name: self.agent})
        return create_app(project, runtime=self.runtime)

    async def close(self) -> None:
        self.building.clear()
        await self.runtime.close()
        await self.log.close()


STACKS: dict[str, Any] = {"runtime": RuntimeStack}
