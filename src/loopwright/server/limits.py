"""What bounds the server's work (settings in `[server]`, see `settings`):

- **Connections.** A new connection must start talking within `idle_timeout` seconds, and send
  a whole request (head and body) within `request_timeout` of opening or of its previous answer;
  otherwise it is closed. A connection kept alive between requests is closed after
  `idle_timeout`. Silent or unfinished connections hold no place: `Budget` counts requests
  being served, and only once they are authenticated.
- **Requests.** At most `max_connections` authenticated requests are served at once (a held
  stream is one until it closes: its place is free as soon as its client is gone); past it,
  503 with `Retry-After`.
- **Tenants.** One tenant holds at most `max_runs_per_tenant` runs started by its requests (a
  message, a resumption, a compaction) and `max_streams_per_tenant` event streams at once; past
  either, 429 with `Retry-After`, so one tenant cannot starve the others. A decision on a
  pending item is never refused for runs (it lets admitted work finish); the run it resumes
  counts. With two tenants or more, a tenant is also served at most half of `max_connections`
  requests at once (its share, `ServerSettings.tenant_share`: 429 past it), and both caps are
  bounded by that share: whatever the settings, no tenant holds every place.

`serve_config` is the uvicorn configuration `loopwright serve` runs with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .guard import TENANT, send_error
from .settings import ServerSettings
from .views import ApiError

if TYPE_CHECKING:
    import uvicorn

RETRY_AFTER = 5
"""Seconds a client refused for load is asked to wait (`Retry-After`)."""


def serve_config(app: Any, settings: ServerSettings, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for `app`: its HTTP protocol with the connection deadlines of
    `settings` (no `limit_concurrency`: silent connections must not count; `Budget` does)."""
    import uvicorn

    return uvicorn.Config(app, http=deadlines(settings), **options)


def deadlines(settings: ServerSettings) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, closing connections that stay silent or send too slowly."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Deadlines(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.timeout_keep_alive = settings.idle_timeout  # type: ignore[assignment]

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()  # a whole request within request_timeout; a first byte within idle
            self.timeout_keep_alive_task = self.loop.call_later(
                settings.idle_timeout, self.timeout_keep_alive_handler
            )

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._deadline is None:  # (a request sent while the previous one is answered)
                self._arm()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self._deadline is None and not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(settings.request_timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return Deadlines


class Budget:
    """At most `max_connections` requests served at once, counted once authenticated (after
    `guard.admit`, in `front.Front`); past it, 503 with `Retry-After`; and at most a tenant's
    share of them for each tenant (429 past it)."""

    def __init__(self, app: ASGIApp, settings: Callable[[], ServerSettings]) -> None:
        self.app = app
        self.settings = settings
        self.serving = 0
        self.tenants: dict[str, int] = {}
        """Requests being served, per tenant (`ServerSettings.tenant_share` bounds them)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        headers = {"Retry-After": str(RETRY_AFTER)}
        if self.serving >= settings.max_connections:
            await send_error(send, 503, "the server is serving all it can: retry later", headers)
            return
        tenant: str | None = scope.get(TENANT)
        share = settings.tenant_share()
        if tenant is not None and self.tenants.get(tenant, 0) >= share:
            said = f"too many requests at once for this tenant (at most {share}): retry later"
            await send_error(send, 429, said, headers)
            return
        self.serving += 1
        if tenant is not None:
            self.tenants[tenant] = self.tenants.get(tenant, 0) + 1
        serving = True

        def give_back() -> None:
            nonlocal serving
            if serving:
                serving = False
                self.serving -= 1
                if tenant is not None:
                    if (left := self.tenants[tenant] - 1) > 0:
                        self.tenants[tenant] = left
                    else:
                        del self.tenants[tenant]

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":  # its client is gone: nothing to serve
                give_back()
            return message

        try:
            await self.app(scope, watched, send)
        finally:
            give_back()


class TenantLimits:
    """Runs and streams held per tenant (see the module docstring). `run(tenant)` and
    `stream(tenant)` take a place or raise a 429 `ApiError`; what they return gives it back
    (once, however often it is called)."""

    def __init__(self, settings: Callable[[], ServerSettings]) -> None:
        self.settings = settings
        self.runs: dict[str, int] = {}
        self.streams: dict[str, int] = {}

    def run(self, tenant: str, *, counted: bool = False) -> Callable[[], None]:
        """A place for a run (`counted`: taken even past the limit, for a run a decision
        resumed — work already admitted goes on)."""
        limit = self.settings().tenant_cap("max_runs_per_tenant")
        return self._take(self.runs, tenant, limit, "runs", counted)

    def stream(self, tenant: str) -> Callable[[], None]:
        limit = self.settings().tenant_cap("max_streams_per_tenant")
        return self._take(self.streams, tenant, limit, "streams", False)

    def _take(
        self, held: dict[str, int], tenant: str, limit: int, what: str, counted: bool
    ) -> Callable[[], None]:
        if held.get(tenant, 0) >= limit and not counted:
            raise ApiError(
                429,
                f"too many {what} at once for this tenant (at most {limit}): retry later",
                {"Retry-After": str(RETRY_AFTER)},
            )
        held[tenant] = held.get(tenant, 0) + 1
        given = False

        def give_back() -> None:
            nonlocal given
            if not given:
                given = True
                if (left := held[tenant] - 1) > 0:
                    held[tenant] = left
                else:
                    del held[tenant]

        return give_back
