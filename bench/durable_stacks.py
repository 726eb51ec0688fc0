"""The durable stacks bench/durable.py measures: one small adapter class each, in `STACKS`.

An adapter is made with `(directory, agent)` — a fresh, empty directory of its own and the
benchmark's agent — and is used as:

    await stack.open()                        # the store (log) in `directory`
    await stack.append_turn(id, text)         # building: one turn through the store; it may keep
                                              #   a session open between calls, as a chat does
    await stack.last_seq(id)                  # the session's last committed seq (0: none yet)
    session = await stack.session(id)         # open it from the store, as a new message does
    text = await stack.run(session, text)     # one turn to its `done`; the final text
    stack.app()                               # an ASGI app serving the agent, or None (no HTTP)
    await stack.close()

`session` + `run` is what a message costs; the benchmark times the two apart. Everything runs
under tenant "default".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopwright import Agent
from loopwright.errors import UnknownSession

TENANT = "default"


class OldStack:
    """Today's stack: `open_store` (SQLiteStore) and `store.durable.open_session`, which rebuilds
    the session by replaying its whole log; the server is `create_app` over the same store."""

    name = "old"

    def __init__(self, directory: Path, agent: Agent) -> None:
        self.directory, self.agent = directory, agent
        self.building: dict[str, Any] = {}

    async def open(self) -> None:
        from loopwright.store import open_store

        self.store = open_store(self.directory / "loopwright.db")

    async def session(self, session_id: str) -> Any:
        from loopwright.store.durable import open_session

        return await open_session(self.agent, self.store, session_id, tenant=TENANT)

    async def run(self, session: Any, text: str) -> str:
        return str((await session.run(text).result()).text)

    async def append_turn(self, session_id: str, text: str) -> None:
        if session_id not in self.building:
            self.building[session_id] = await self.session(session_id)
        await self.run(self.building[session_id], text)

    async def last_seq(self, session_id: str) -> int:
        try:
            return int(self.store.session(session_id, TENANT).last_seq)
        except UnknownSession:
            return 0

    def app(self) -> Any:
        from loopwright.project import Project
        from loopwright.server import create_app

        project = Project(root=self.directory, agents={self.agent.name: self.agent})
        return create_app(project, store=self.store)

    async def close(self) -> None:
        self.building.clear()
        self.store.close()


class RuntimeStack:
    """The new stack: `store.sqlite_log.SQLiteLog` (the `EventLog` of store/log.py) under the
    `loopwright.runtime` service (`Runtime`, with its `LogJournal`).

    STUB: `loopwright.runtime` was not committed when this was written. To fill it in:
    `open` opens the log (`open_log` / `SQLiteLog` on `directory / "loopwright.db"`) and a
    `Runtime` over it with the agent; `session` opens the session by its key (tenant, agent,
    id) the way the runtime does for a new message (latest snapshot + the events after it);
    `run` sends `text` and awaits the turn's final text; `append_turn` may simply be
    `run(await session(id), text)` if opening is cheap, or keep the session open; `last_seq` is
    `(await log.session(key)).last_seq` (0 on `UnknownSession`); `app` is the server built over
    the runtime; `close` closes runtime and log."""

    name = "runtime"
    stub = "loopwright.runtime was not committed when this adapter was written"

    def __init__(self, directory: Path, agent: Agent) -> None:
        raise NotImplementedError(f"bench/durable_stacks.py: RuntimeStack is a stub ({self.stub})")


STACKS: dict[str, Any] = {"old": OldStack, "runtime": RuntimeStack}
