"""What every route works with: the project, the runtime over its event log, and the settings;
and the answer the run-starting routes share — 200 with the run's body once it ends, or 202 with
the first item it paused on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import events as ev
from .. import redact
from ..agent import Agent
from ..errors import describe
from ..project import Project
from ..runtime import LiveRun, Runtime
from ..runtime.journal import NOT_STORED
from ..runtime.titling import Titler
from ..store import StoreError
from ..store.log import SessionKey, Store
from ..wire import Profile, dumps
from .limits import TenantLimits
from .settings import ServerSettings
from .views import ApiError, final_body, paused_body, spliced


@dataclass(slots=True)
class State:
    """The server's state; `loopwright dev` replaces the project (and the runtime's agents)."""

    project: Project
    runtime: Runtime
    settings: ServerSettings
    owns_runtime: bool = False
    owns_log: bool = False
    titler: Titler | None = None
    """What writes the titles of the runtime made with the app (`runtime.titling`)."""
    limits: TenantLimits = field(init=False)
    draining: asyncio.Event = field(init=False)
    """Set as the server begins to stop: endless streams (`sse.EventStream`) end cleanly then,
    so the server's graceful shutdown does not wait on them and cut them at its deadline."""

    def __post_init__(self) -> None:
        self.limits = TenantLimits(lambda: self.settings)
        self.draining = asyncio.Event()

    def places(self, tenant: str, *, run: bool = False, stream: bool = False) -> Places:
        """The tenant's places for a run and a stream (429 when it holds too many)."""
        return Places(self.limits, tenant, run=run, stream=stream)

    @property
    def log(self) -> Store:
        return self.runtime.log

    def agent(self, name: str) -> Agent:
        agent = self.project.agents.get(name)
        if agent is None:
            raise ApiError(404, f"unknown agent '{name}'")
        return agent

    def folder(self, name: str) -> Path:
        return self.project.folders.get(name, self.project.root)

    def serve(self, project: Project, settings: ServerSettings) -> None:
        """Serve another version of the project (runs already going keep their agents)."""
        self.project, self.settings = project, settings
        self.runtime.agents = project.agents

    async def close(self) -> None:
        """Shutdown: live runs are cancelled and recorded, titles being written cancelled,
        then the log is closed."""
        if self.owns_runtime:
            await self.runtime.close()
        if self.titler is not None:
            await self.titler.close()
        if self.owns_log:
            await self.runtime.log.close()


def state_of(request: Request) -> State:
    state: State = request.app.state.loopwright
    return state


def run_events(live: LiveRun) -> list[ev.Event]:
    """The events of a run that ended, as the log holds them (token deltas are not logged)."""
    return [e for e in live.items if e.type not in NOT_STORED]


async def plain_answer(
    state: State, live: LiveRun, profile: Profile, *, whole_turn: bool = False
) -> JSONResponse:
    """Once the run ends, its answer (see `ended`). `whole_turn`: the events from the start of
    the turn (a resumed run's answer), else this run's events."""
    done = await live.wait()
    if done is None:
        failure = live.failure or RuntimeError("the run stopped without an answer")
        if isinstance(failure, StoreError):  # the log failed: a short 503 (`app`), no details
            raise failure
        return JSONResponse(
            {"error": redact.text(f"the run failed: {describe(failure)}")}, status_code=500
        )
    events = await state.runtime.turn(live.key) if whole_turn else run_events(live)
    return await ended(state, live.key, done, events, profile)


async def ended(
    state: State, key: SessionKey, done: ev.Done, events: list[ev.Event], profile: Profile
) -> JSONResponse:
    """200 with the final body, or 202 with the first open item when the run paused."""
    if done.stop_reason == "paused":
        waiting = await state.runtime.outstanding(key)
        if waiting:
            return JSONResponse(paused_body(waiting, key, events, profile), status_code=202)
    output = state.agent(key.agent).output if key.agent in state.project.agents else None
    if profile == "full":
        return FullBody(final_body(key.id, done, events, profile, output, raw=True))
    return JSONResponse(final_body(key.id, done, events, profile, output))


class FullBody(JSONResponse):
    """A full-profile final body whose `events` are the events: each serialised once
    (`wire.dumps`, the JSON the log stores, redacted) into the body's JSON, instead of made a
    dict (`to_dict`) that the body's `json.dumps` serialises again."""

    def render(self, content: Any) -> bytes:
        keys = list(content)
        at = keys.index("events")
        events = ",".join(dumps(event) for event in content["events"])
        head, tail = {k: content[k] for k in keys[:at]}, {k: content[k] for k in keys[at + 1 :]}
        return spliced(head, "events", events, tail)


class Places:
    """A request's places in its tenant's limits: taken at once (or a 429 before anything is
    done), each given back exactly once — the run's when the run it started ends (`ran`), the
    stream's when its response closes (`on_close`), and whatever is left by `close`."""

    def __init__(self, limits: TenantLimits, tenant: str, *, run: bool, stream: bool) -> None:
        self.limits, self.tenant = limits, tenant
        self.run: Callable[[], None] | None = None
        self.stream: Callable[[], None] | None = limits.stream(tenant) if stream else None
        try:
            self.run = limits.run(tenant) if run else None
        except ApiError:
            self.close()
            raise

    def ran(self, live: LiveRun | None) -> None:
        """The request started `live` (None: no run here): its place is held until it ends."""
        give_back, self.run = self.run, None
        if give_back is None:
            return
        if live is None:
            give_back()
            return
        live.when_finished(give_back)

    def counted(self, live: LiveRun | None) -> None:
        """`live` was resumed by a decision (never refused): it counts from now on, whatever
        the limit."""
        if live is not None and self.run is None:
            self.run = self.limits.run(self.tenant, counted=True)
            self.ran(live)

    def on_close(self, also: Callable[[], None] | None = None) -> Callable[[], None]:
        """What a stream's response calls when it closes (after `also`)."""
        give_back, self.stream = self.stream, None

        def closed() -> None:
            if also is not None:
                also()
            if give_back is not None:
                give_back()

        return closed

    def close(self) -> None:
        for give_back in (self.run, self.stream):
            if give_back is not None:
                give_back()
        self.run = self.stream = None
