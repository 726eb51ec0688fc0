"""The Starlette application: one routes list, the error shape, the one middleware layer
(`front`: the /v1 prefix, security headers, Host check, CORS when configured, authentication
and body size, the budget of requests served at once) and the lifespan (live runs are cancelled and recorded on shutdown, then the event log is
closed)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from ..errors import ConfigError, LoopwrightError, SessionBusy, UnknownPending, UnknownSession
from ..store import StaleWriter, StoreError
from . import (
    a2a,
    admin,
    agui,
    custom,
    fork,
    lifecycle,
    links,
    openapi,
    reference,
    replays,
    resolve,
    results,
    routes,
    rules_check,
    trace,
)
from .front import Front
from .settings import version
from .state import State
from .usage import usage
from .views import ApiError

STATIC = Path(__file__).with_name("static")
log = logging.getLogger("loopwright.server")


def build(state: State) -> Starlette:
    session = "/agents/{name}/sessions/{id}"
    table = [  # (the busiest first: routing tries each in turn; no two match the same path)
        Route("/agents/{name}/messages", routes.post_message, methods=["POST"]),
        Route("/agents/{name}/messages/stream", routes.post_message, methods=["POST"]),
        Route("/health", routes.health, methods=["GET"]),
        Route("/", lambda _: RedirectResponse("/playground"), methods=["GET"]),
        Route("/playground", playground, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/docs", reference.docs, methods=["GET"]),
        Route("/agents", routes.list_agents, methods=["GET"]),
        Route("/agents/{name}/config", routes.agent_config, methods=["GET"]),
        Route("/agents/{name}/agui", agui.run, methods=["POST"]),  # (AG-UI front ends)
        Route("/a2a/{name}", a2a.rpc, methods=["POST"]),  # (A2A agents and clients)
        Route(f"/a2a/{{name}}{a2a.CARD}", a2a.agent_card, methods=["GET"]),
        Route("/agents/{name}/sessions", routes.list_sessions, methods=["GET"]),
        Route(session, routes.show_session, methods=["GET"]),
        Route(f"{session}/events", routes.session_events, methods=["GET"]),
        Route(f"{session}/stream", routes.session_events, methods=["GET"]),
        Route(f"{session}/cancel", routes.cancel, methods=["POST"]),
        Route(f"{session}/steer", routes.steer, methods=["POST"]),
        Route(f"{session}/messages", custom.add_message, methods=["POST"]),
        Route(f"{session}/compact", routes.compact, methods=["POST"]),
        Route(f"{session}/resume", routes.resume, methods=["POST"]),
        Route(f"{session}/replay", replays.replay, methods=["POST"]),
        Route(f"{session}/fork", fork.fork_session, methods=["POST"]),
        Route(f"{session}/trace", trace.show, methods=["GET"]),
        Route(f"{session}/results/{{ref}}", results.show, methods=["GET"]),
        Route("/agents/{name}/approvals", resolve.agent_items, methods=["GET"]),
        Route("/agents/{name}/questions", resolve.agent_items, methods=["GET"]),
        Route(f"{session}/approvals", resolve.agent_items, methods=["GET"]),
        Route(f"{session}/questions", resolve.agent_items, methods=["GET"]),
        Route("/pending", resolve.all_items, methods=["GET"]),
        Route("/usage", usage, methods=["GET"]),
        Route("/lifecycle", lifecycle.stream, methods=["GET"]),
        Route("/rules/check", rules_check.check, methods=["POST"]),
        Route("/approvals/{id}/approve", resolve.approve, methods=["POST"]),
        Route("/approvals/{id}/deny", resolve.deny, methods=["POST"]),
        Route("/questions/{id}/answer", resolve.answer, methods=["POST"]),
        Route("/pending-approvals/{id}/resolve", resolve.resolve_pending, methods=["POST"]),
        Route("/pending-questions/{id}/answer", resolve.answer_pending, methods=["POST"]),
        Route("/links/{token}", links.show, methods=["GET"]),
        Route("/links/{token}/decide", links.decide, methods=["POST"]),
        Route("/notifications", links.notifications, methods=["GET"]),
        Route("/admin/agents", admin.list_agents, methods=["GET"]),
        Route("/admin/agents", admin.create_agent, methods=["POST"]),
        Route("/admin/agents/{name}/files/{file:path}", admin.read_file, methods=["GET"]),
        Route("/admin/agents/{name}/files/{file:path}", admin.write_file, methods=["PUT"]),
        Mount("/static", app=Static()),
    ]
    cors = None
    if state.settings.cors_origins:
        cors = {
            "allow_origins": list(state.settings.cors_origins),
            "allow_methods": ["GET", "POST"],
            "allow_headers": ["Authorization", "Content-Type", "Last-Event-ID"],
        }
    middleware = [Middleware(Front, settings=lambda: state.settings, cors=cors)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        worker = None
        try:
            await open_store(state)  # a bad [store] url fails the startup, not a first request
            worker = await links.start_worker(state)  # webhooks: [notify] (notify/)
            yield
        finally:
            if worker is not None:
                await worker.close()
            await state.close()

    app = Starlette(
        routes=table,
        middleware=middleware,
        exception_handlers={
            HTTPException: http_error,
            ApiError: api_error,
            LoopwrightError: loopwright_error,
            ClientDisconnect: gone,
            Exception: server_error,
        },
        lifespan=lifespan,
    )
    app.state.loopwright = state
    return app


async def open_store(state: State) -> None:
    """Open the event log the app owns (a PostgreSQL database is otherwise connected to, and
    its schema migrated, on first use): `StoreError` when it cannot be."""
    opening = getattr(state.log, "open", None)
    if state.owns_log and opening is not None:
        await opening()


async def openapi_json(request: Request) -> JSONResponse:
    return JSONResponse(openapi.document(version()))


async def playground(request: Request) -> Response:
    page = STATIC / "playground.html"
    if not page.is_file():
        return JSONResponse({"error": "not found"}, status_code=404)
    return FileResponse(page, media_type="text/html")


class Static:
    """Files under server/static/ (404 while the folder does not exist)."""

    def __init__(self) -> None:
        self.files = StaticFiles(directory=STATIC, check_dir=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not STATIC.is_dir():
            await JSONResponse({"error": "not found"}, status_code=404)(scope, receive, send)
            return
        try:
            await self.files(scope, receive, send)
        except HTTPException as exc:
            await http_response(exc)(scope, receive, send)


def http_response(exc: HTTPException) -> JSONResponse:
    messages = {404: "not found", 405: "method not allowed"}
    message = messages.get(exc.status_code, exc.detail)
    return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return http_response(exc)


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)


async def loopwright_error(request: Request, exc: Exception) -> Response:
    """What the core raises, as the status it means."""
    status = 500
    if isinstance(exc, (SessionBusy, StaleWriter)):
        status = 409
    elif isinstance(exc, (UnknownSession, UnknownPending)):
        status = 404
    elif isinstance(exc, StoreError):  # the details (database, host, user) are the operator's
        log.error("the event log failed on %s %s: %s", request.method, request.url.path, exc)
        headers = {"Retry-After": str(STORE_RETRY_AFTER)}
        return JSONResponse({"error": STORE_DOWN}, status_code=503, headers=headers)
    elif isinstance(exc, ConfigError):
        log.error("configuration error: %s", exc)
    return JSONResponse({"error": str(exc)}, status_code=status)


STORE_DOWN = "the event log is unavailable: retry later"
"""A store failure as every client is told it (no database, host, port or user: those go to
the log)."""
STORE_RETRY_AFTER = 2
"""Seconds a client is asked to wait after a store failure (`Retry-After`)."""


async def gone(request: Request, exc: Exception) -> Response:
    """The client went away (or was cut off by a deadline) while its body was read: nobody
    reads the answer."""
    return Response(status_code=400)


async def server_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": "internal server error"}, status_code=500)
