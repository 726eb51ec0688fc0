"""What every request passes before a route sees it: the Host check (against DNS rebinding),
then who the caller is (a bearer token names the tenant; with no token configured only loopback
clients are served, as tenant `default`), then the declared body size.

Both are plain ASGI middleware; the tenant travels in the scope under `TENANT`. Tokens are
compared in constant time, every configured token each time.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .settings import ServerSettings

TENANT = "loopwright.tenant"
PRINCIPAL = "loopwright.principal"
"""Who the request is (`ServerSettings.principal`, or `loopback` without tokens): the decider
every decision made through it is recorded as."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC = ("/health", "/openapi.json", "/", "/playground")
"""Served without a token (they hold no tenant data); everything under /static/ too, and the
approval links' pages under /links/ (their signed token is the credential: `server.links`)."""


async def send_error(
    send: Send, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps({"error": message}, separators=(",", ":")).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
        b"form-action 'self'",
    ),
]
"""On every answer: the playground cannot be framed (no clickjacked Approve button), runs only
its own script, and nothing is sniffed or leaked in a Referer."""


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                own = {bytes(name).lower() for name, _ in headers}  # (a route's own policy wins)
                message["headers"] = [*headers, *(h for h in HEADERS if h[0] not in own)]
            await send(message)

        await self.app(scope, receive, with_headers)


class HostCheck:
    """403 unless the Host header names this server (loopback names, any port, plus
    `allowed_hosts`): a page on another site cannot reach it through DNS rebinding. A request
    that changes something and comes from a page of another origin (its `Origin` is neither this
    server nor one of `cors_origins`) is refused too: no cross-site request forgery."""

    def __init__(self, app: ASGIApp, settings: Callable[[], ServerSettings]) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if host_name(host) not in self.settings().host_names():
            await send_error(send, 403, "host not allowed")
            return
        origin = _header(scope, b"origin")
        if (
            origin
            and scope["method"] not in SAFE_METHODS
            and origin.partition("://")[2].lower() != host.strip().lower()
            and origin not in self.settings().cors_origins
        ):  # a page of another site posting here (CSRF): browsers always send Origin
            await send_error(send, 403, "cross-site request refused")
            return
        await self.app(scope, receive, send)


class Guard:
    """Authentication, tenant and body size (see the module docstring)."""

    def __init__(self, app: ASGIApp, settings: Callable[[], ServerSettings]) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        path: str = scope["path"]
        public = path in PUBLIC or path.startswith(("/static/", "/links/"))
        if not settings.tokens:
            client = scope.get("client")
            if client is not None and not is_loopback(client[0]):
                await send_error(
                    send, 403, "only loopback clients are served when no token is configured"
                )
                return
            scope[TENANT], scope[PRINCIPAL] = "default", "loopback"
        elif not public:
            token = token_of(settings, _header(scope, b"authorization"))
            if token is None:
                await send_error(
                    send, 401, "authorization required", {"WWW-Authenticate": "Bearer"}
                )
                return
            scope[TENANT], scope[PRINCIPAL] = settings.tokens[token], settings.principal(token)
        length = _header(scope, b"content-length")
        if length and (
            not (length.isascii() and length.isdigit()) or int(length) > settings.max_body_bytes
        ):
            await send_error(send, 413, f"the request body is over {settings.max_body_bytes} bytes")
            return
        await self.app(scope, receive, send)


def token_of(settings: ServerSettings, authorization: str) -> str | None:
    """The configured token a `Bearer <token>` header gives, or None; every token is
    compared (in constant time)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    given = token.strip().encode()
    found = None
    for candidate in settings.tokens:
        if hmac.compare_digest(candidate.encode(), given):
            found = candidate
    return found


def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def host_name(host: str) -> str:
    """The name part of a Host header: `[::1]:8787` → `[::1]`, `LocalHost:80` → `localhost`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0]


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return ""
