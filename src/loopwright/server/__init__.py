"""The HTTP server (SPEC §10): every agent of a project behind the loopengine v1 routes, with
our richer events for clients that want them, and the web playground.

    from loopwright.project import load_project
    from loopwright.server import create_app

    app = create_app(load_project("."))        # a Starlette app; `loopwright serve` runs it

Every route goes through one `loopwright.runtime.Runtime` over the project's event log (the
SQLite file where the project keeps its sessions). Runs are durable: an `ask` waits for a decision
while a client holds the run's stream, and pauses the run otherwise, until a client (or the CLI,
or another server) decides it. Sessions are named by (tenant, agent, id). Modules: `app` (routes
list, errors, middleware: `front`), `routes` (agents and sessions), `resolve` (pending items),
`elsewhere` (a decision waiting on a run in another process, which may die), `state` (what
routes share), `sse`, `views` (the API's shapes), `guard` (Host check, tokens and tenants, body
size), `settings`, `openapi`, `config` (an agent's resolved configuration), `dev` (reload on
change). Nothing in the core imports this package.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette

from ..project import Project
from ..runtime import Runtime
from ..runtime.titling import Titler
from ..store.log import Store
from .settings import ServerSettings, version
from .state import State

__all__ = ["ServerSettings", "State", "create_app", "version"]


def create_app(
    project: Project,
    log: Store | None = None,
    *,
    runtime: Runtime | None = None,
    settings: ServerSettings | None = None,
    **overrides: Any,
) -> Starlette:
    """The application serving `project`: its agents driven by `runtime`, or by a runtime of
    its own over `log` — by default the project's event log, opened here (and closed on
    shutdown, after the runtime). `settings` default to `[server]`/`[auth]`/`[titles]` of
    loopwright.toml, with `overrides` (e.g. `host=`, `max_body_bytes=`, `tokens=`, `titles=`)
    on top; a runtime made here writes sessions' titles with `settings.titles` (a runtime
    given is as it was made: `runtime.titling`)."""
    from .app import build

    if settings is None:
        settings = ServerSettings.from_project(project.settings, **overrides)
    owns_log, owns_runtime = runtime is None and log is None, runtime is None
    titler: Titler | None = None
    if runtime is None:
        if log is None:
            from ..store.opening import log_at

            # not `open_log`: the app is built before its event loop runs (a PostgreSQL
            # database is connected to on first use, in that loop)
            log = log_at(project.store_url(), pool_size=project.store_pool_size())
        titler = Titler(settings.titles, log) if settings.titles else None  # (runtime.titling)
        runtime = Runtime(project.agents, log, observers=titler.observers() if titler else None)
    state = State(project=project, runtime=runtime, settings=settings)
    state.titler = titler if owns_runtime else None
    state.owns_runtime, state.owns_log = owns_runtime, owns_log
    return build(state)
