"""The one ASGI layer in front of the routes, in this order: the `/v1` prefix (`prefix`), the
security headers on every answer, the Host and cross-site checks, CORS when configured, then who
the caller is and the body size (`guard`), then the budget of requests served at once
(`limits.Budget`). One layer instead of six: each was a call, a scope lookup and (for the
headers and the budget) a wrapper around `send` or `receive` on every request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .guard import HEADER_NAMES, HEADERS, admit, refused_host, send_error
from .limits import Budget
from .prefix import unprefixed
from .settings import ServerSettings


class Front:
    """See the module docstring. `cors`: `CORSMiddleware`'s options, or None (CORS off)."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Callable[[], ServerSettings],
        cors: dict[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.budget = Budget(app, settings)
        self.names: tuple[ServerSettings, frozenset[str]] | None = None
        """The settings last seen and their `host_names()` (new settings only on a reload)."""
        self.inner: ASGIApp = self.guarded
        if cors is not None:
            self.inner = CORSMiddleware(self.guarded, **cors)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            await self.app(unprefixed(scope) if kind == "websocket" else scope, receive, send)
            return
        scope = unprefixed(scope)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers") or ()
                if any(bytes(name).lower() in HEADER_NAMES for name, _ in headers):
                    own = {bytes(name).lower() for name, _ in headers}  # (a route's own wins)
                    message["headers"] = [*headers, *(h for h in HEADERS if h[0] not in own)]
                else:
                    message["headers"] = [*headers, *HEADERS]
            await send(message)

        settings = self.settings()
        if self.names is None or self.names[0] is not settings:
            self.names = (settings, settings.host_names())
        refusal = refused_host(scope, settings, self.names[1])
        if refusal is not None:
            await send_error(with_headers, 403, refusal)
            return
        await self.inner(scope, receive, with_headers)

    async def guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await admit(scope, self.settings(), send):
            await self.budget(scope, receive, send)
