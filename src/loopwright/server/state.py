"""What every route works with: the project, its store, the settings and the live runs; and
the two steps every run-starting route shares — start a run in a server-owned task, then answer
with the plain 200/202 body once it ends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..agent import Agent
from ..errors import describe
from ..project import Project
from ..session import Run, Session
from ..store import Store
from ..wire import Profile
from .runs import LiveRun, Runs
from .settings import ServerSettings
from .views import ApiError, final_body, open_items, turn_events


@dataclass(slots=True)
class State:
    """The server's state; `project` is replaced when `loopwright dev` reloads it."""

    project: Project
    store: Store
    settings: ServerSettings
    runs: Runs = field(default_factory=Runs)
    owns_store: bool = False

    def agent(self, name: str) -> Agent:
        agent = self.project.agents.get(name)
        if agent is None:
            raise ApiError(404, f"unknown agent '{name}'")
        return agent

    def folder(self, name: str) -> Path:
        return self.project.folders.get(name, self.project.root)


def state_of(request: Request) -> State:
    state: State = request.app.state.loopwright
    return state


async def start_run(state: State, session: Session, begin: Callable[[], Run]) -> LiveRun:
    """Start `begin()` in a server-owned task and wait for its first event (raises
    `SessionBusy`, `UnknownSession` or `StaleWriter` when the run cannot take the session)."""
    state.runs.check_idle(session.tenant, session.id)
    live = state.runs.start(session, begin())
    await live.started()
    return live


async def plain_answer(
    state: State, live: LiveRun, agent: str, profile: Profile, *, whole_turn: bool = False
) -> JSONResponse:
    """Once the run ends: 200 with the final body, or 202 with the first open item when it
    paused. `whole_turn`: the events from the start of the turn (a resumed run's answer),
    else this run's events."""
    await live.finished.wait()
    tenant, session_id = live.key
    if live.done is None:
        failure = live.failure or RuntimeError("the run stopped without an answer")
        return JSONResponse({"error": f"the run failed: {describe(failure)}"}, status_code=500)
    events = turn_events(state.store, session_id, tenant) if whole_turn else live.stored_events()
    if live.done.stop_reason == "paused":
        waiting = open_items(state.store, tenant, agent=agent, session_id=session_id)
        if waiting:
            ids = [p.item.id for p in waiting]
            return JSONResponse(waiting[0].paused_body(ids, events, profile), status_code=202)
    return JSONResponse(final_body(session_id, live.done, events, profile))
