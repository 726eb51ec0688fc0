"""What every request passes before a route sees it: the Host check (against DNS rebinding),
then who the caller is (a bearer token names the tenant; with no token configured only loopback
clients are served, as tenant `default`), then the declared body size.

`front.Front` runs both (one ASGI layer); the tenant travels in the scope under `TENANT`.
Tokens are compared in constant time, every configured token each time.
"""

from __future__ import annotations

import hmac
import ipaddress
import json

from starlette.types import Scope, Send

from .settings import ServerSettings

TENANT = "loopwright.tenant"
PRINCIPAL = "loopwright.principal"
"""Who the request is (`ServerSettings.principal`, or `loopback` without tokens): the decider
every decision made through it is recorded as."""
ADMIN = "loopwright.admin"
"""Whether the request's token has the `admin` role (`ServerSettings.admins`)."""
LOOPBACK_ADDRESSES = frozenset({"127.0.0.1", "::1"})
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


HEADER_NAMES = frozenset(name for name, _ in HEADERS)


def refused_host(scope: Scope, settings: ServerSettings, names: frozenset[str]) -> str | None:
    """Why the request is refused (403), or None: the Host header must name this server
    (loopback names, any port, plus `allowed_hosts`), so that a page on another site cannot
    reach it through DNS rebinding; and a request that changes something from a page of another
    origin (its `Origin` is neither this server nor one of `cors_origins`) is refused too: no
    cross-site request forgery. `names`: `settings.host_names()`."""
    host = _header(scope, b"host")
    if host_name(host) not in names:
        return "host not allowed"
    origin = _header(scope, b"origin")
    if (
        origin
        and scope["method"] not in SAFE_METHODS
        and origin.partition("://")[2].lower() != host.strip().lower()
        and origin not in settings.cors_origins
    ):  # a page of another site posting here (CSRF): browsers always send Origin
        return "cross-site request refused"
    return None


async def admit(scope: Scope, settings: ServerSettings, send: Send) -> bool:
    """Authentication, tenant and body size (see the module docstring): whether the request
    goes on (its tenant and principal set in the scope), or was answered with its refusal."""
    path: str = scope["path"]
    if not settings.tokens:
        client = scope.get("client")
        if client is not None and not is_loopback(client[0]):
            await send_error(
                send, 403, "only loopback clients are served when no token is configured"
            )
            return False
        scope[TENANT], scope[PRINCIPAL] = "default", "loopback"
    elif not (path in PUBLIC or path.startswith(("/static/", "/links/"))):
        token = token_of(settings, _header(scope, b"authorization"))
        if token is None:
            await send_error(send, 401, "authorization required", {"WWW-Authenticate": "Bearer"})
            return False
        scope[TENANT], scope[PRINCIPAL] = settings.tokens[token], settings.principal(token)
        scope[ADMIN] = token in settings.admins
    length = _header(scope, b"content-length")
    if length and (
        not (length.isascii() and length.isdigit()) or int(length) > settings.max_body_bytes
    ):
        await send_error(send, 413, f"the request body is over {settings.max_body_bytes} bytes")
        return False
    return True


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
    """Whether the client address is a loopback one (the usual two without parsing)."""
    if host in LOOPBACK_ADDRESSES:
        return True
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
