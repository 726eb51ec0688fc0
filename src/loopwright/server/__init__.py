"""The HTTP server (SPEC §10): every agent of a project behind the loopengine v1 routes, with
our richer events for clients that want them, and the web playground.

    from loopwright.project import load_project
    from loopwright.server import create_app

    app = create_app(load_project("."))        # a Starlette app; `loopwright serve` runs it

Runs are durable (the project's store; nobody answers approvals live, so an `ask` pauses the
run and a client resolves it later). Modules: `app` (routes list, errors, middleware), `routes`
(agents and sessions), `resolve` (pending items), `state` (what routes share), `runs` (live
runs and their fan-out), `sse`, `views` (the API's shapes), `guard` (Host check, tokens and
tenants, body size), `settings`, `openapi`, `config` (an agent's resolved configuration), `dev`
(reload on change). Nothing in the core imports this package.
"""

from __future__ import annotations

import functools
from typing import Any

from starlette.applications import Starlette

from ..project import Project
from ..store import Store
from .settings import ServerSettings
from .state import State

__all__ = ["ServerSettings", "State", "create_app", "version"]


def create_app(
    project: Project,
    store: Store | None = None,
    *,
    settings: ServerSettings | None = None,
    **overrides: Any,
) -> Starlette:
    """The application serving `project`. `store` defaults to the project's store (opened
    here and closed on shutdown); `settings` to `[server]`/`[auth]` of loopwright.toml, with
    `overrides` (e.g. `host=`, `max_body_bytes=`, `tokens=`) applied on top."""
    from .app import build

    if settings is None:
        settings = ServerSettings.from_project(project.settings, **overrides)
    owns = store is None
    if store is None:
        from ..store import open_store

        store = open_store(project.store_path())
    return build(State(project=project, store=store, settings=settings, owns_store=owns))


@functools.cache
def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("loopwright")
    except PackageNotFoundError:
        return "unknown"
