"""The server's settings: `[server]` and `[auth]` in loopwright.toml, checked once at start.

    [server]
    host = "127.0.0.1"              # loopback unless you say otherwise
    port = 8787
    max_body_bytes = 1048576        # larger request bodies get 413
    max_connections = 100           # authenticated requests served at once; more get 503
    request_timeout = 10            # seconds to send a whole request; then the connection closes
    idle_timeout = 5                # seconds a connection may stay silent (new, or kept alive)
    max_runs_per_tenant = 50        # runs a tenant's requests hold at once; more get 429
    max_streams_per_tenant = 50     # event streams a tenant holds open at once; more get 429
                                    # (both, and a tenant's requests at once, are at most half
                                    # of max_connections when two tenants or more are configured)
    allowed_hosts = ["agents.example.com"]   # Host headers accepted besides loopback names
    cors_origins = ["https://app.example.com"]   # CORS is off unless listed
    profile = "v1"                  # default event profile: "full" (default) or loopengine "v1"

    [auth.tokens]                   # bearer token = tenant
    "long-random-token" = "acme"

    [[auth.token]]                  # or read the token from the environment
    env = "LOOPWRIGHT_TOKEN_GLOBEX"
    tenant = "globex"
    name = "globex-ops"             # who decides with it (default: the variable's name)
    roles = ["admin"]               # admin: may create and edit agents (docs/admin.md)

A decision made with a token is recorded as `token:<its name>` (an `[auth.tokens]` token's name
is its tenant); without tokens, as `loopback`.

With no token configured only loopback clients are served, as tenant `default`.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import redact
from ..errors import ConfigError
from ..runtime.titling import Titles
from ..wire import Profile

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
LIMITS = ("request_timeout", "idle_timeout", "max_runs_per_tenant", "max_streams_per_tenant")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """What the HTTP server needs to know; `from_project` reads it from loopwright.toml."""

    host: str = "127.0.0.1"
    """The interface to bind."""
    port: int = 8787
    max_body_bytes: int = 1 << 20
    """Request bodies above this size are refused with 413."""
    max_connections: int = 100
    """Requests served at once, counted once authenticated (a held stream counts until it
    closes); beyond it, 503 with `Retry-After`. Connections that send nothing count for nothing."""
    request_timeout: float = 10.0
    """Seconds a connection has to send a whole request (head and body), from its opening or
    from its previous answer; then it is closed."""
    idle_timeout: float = 5.0
    """Seconds a connection may stay silent, new or between requests, before it is closed."""
    max_runs_per_tenant: int = 50
    """Runs one tenant's requests hold at once (sends, resumptions, compactions); beyond, 429.
    (50, like the streams': half of the default `max_connections` for one tenant.) Bounded by
    the tenant's share of `max_connections` (`tenant_cap`)."""
    max_streams_per_tenant: int = 50
    """Event streams one tenant holds open at once; beyond, 429 with `Retry-After`. Bounded
    like the runs (`tenant_cap`)."""
    allowed_hosts: tuple[str, ...] = ()
    """Host header names accepted besides localhost, 127.0.0.1 and [::1] (any port)."""
    cors_origins: tuple[str, ...] = ()
    """Origins allowed by CORS; empty turns CORS off."""
    tokens: Mapping[str, str] = field(default_factory=dict)
    """Bearer token → tenant. Empty: loopback clients only, as tenant `default`."""
    token_names: Mapping[str, str] = field(default_factory=dict)
    """Bearer token → its name, who the decisions made with it are recorded as made by (a
    token not named here is named by its tenant)."""
    admins: frozenset[str] = frozenset()
    """The tokens with the `admin` role (`roles = ["admin"]` in `[[auth.token]]`): they may
    create and edit agents (`server.admin`). Without tokens, nobody is an admin."""
    cancel_wait: float = 10.0
    """Seconds a cancel request waits for the run to record its end."""
    keepalive: float = 15.0
    """Seconds of silence after which a stream gets a keep-alive comment."""
    profile: Profile = "full"
    """The profile of every route that does not ask for one (`?profile=`, or the `/v1` prefix,
    which always means v1): `full`, or `v1` for loopengine v1 clients that cannot ask."""

    titles: Titles | None = None
    """The model that writes new sessions' titles (`[titles]`, `runtime.titling`); None: a
    session's title is its first message."""

    @classmethod
    def from_project(cls, settings: Mapping[str, Any], **overrides: Any) -> ServerSettings:
        """Read `[server]` and `[auth]`; a wrong type or an unset token variable is a
        `ConfigError` naming the key."""
        server = _table(settings, "server")
        auth = _table(settings, "auth")
        values: dict[str, Any] = {}
        for key, kind in (
            ("host", str),
            ("port", int),
            ("max_body_bytes", int),
            ("max_connections", int),
            ("max_runs_per_tenant", int),
            ("max_streams_per_tenant", int),
            ("request_timeout", float),
            ("idle_timeout", float),
        ):
            if key in server:
                values[key] = _typed(server[key], kind, f"[server] {key}")
        for key in ("allowed_hosts", "cors_origins"):
            if key in server:
                values[key] = tuple(_strings(server[key], f"[server] {key}"))
        if "profile" in server:
            profile = server["profile"]
            if profile not in ("full", "v1"):
                raise ConfigError('[server] profile must be "full" or "v1"')
            values["profile"] = profile
        values["tokens"], values["token_names"], values["admins"] = _tokens(auth)
        values["titles"] = Titles.from_project(settings)
        values.update({k: v for k, v in overrides.items() if v is not None})
        made = cls(**values)
        if not 0 <= made.port <= 65535:
            raise ConfigError(f"[server] port must be 0-65535, not {made.port}")
        if made.max_body_bytes < 1 or made.max_connections < 1:
            raise ConfigError("[server] max_body_bytes and max_connections must be positive")
        for key in LIMITS:
            if not 0 < getattr(made, key) < math.inf:
                raise ConfigError(f"[server] {key} must be positive")
        return made

    def __post_init__(self) -> None:
        redact.register(*self.tokens)  # the tokens in use never leave in events (P11)

    def tenant_share(self) -> int:
        """The most requests one tenant is served at once: with two tenants or more, half of
        `max_connections` (at least one), so that no tenant ever holds every place; with one,
        all of them (there is nobody to starve)."""
        if len(set(self.tokens.values())) < 2:
            return self.max_connections
        return max(1, self.max_connections // 2)

    def tenant_cap(self, key: str) -> int:
        """`max_runs_per_tenant` or `max_streams_per_tenant` as it applies: bounded by the
        tenant's share of the server's places (`tenant_share`)."""
        configured: int = getattr(self, key)
        return min(configured, self.tenant_share())

    def principal(self, token: str) -> str:
        """Who a request made with `token` is, as decisions record it: `token:<name>`."""
        return f"token:{self.token_names.get(token) or self.tokens[token]}"

    def host_names(self) -> frozenset[str]:
        """Host header names (without port) this server answers to."""
        names = {*LOOPBACK_NAMES, *(h.lower() for h in self.allowed_hosts)}
        if self.host not in ("0.0.0.0", "::", ""):
            names.add(f"[{self.host}]" if ":" in self.host else self.host.lower())
        return frozenset(names)


def _table(settings: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = settings.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{key}] in loopwright.toml must be a table")
    return value


def _typed(value: Any, kind: type, where: str) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        wanted = {str: "a string", int: "an integer", float: "a number (seconds)"}[kind]
        raise ConfigError(f"{where} must be {wanted}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return list(value)


def _tokens(
    auth: Mapping[str, Any],
) -> tuple[dict[str, str], dict[str, str], frozenset[str]]:
    """`[auth.tokens]` (token = tenant) and `[[auth.token]]` (env = NAME, tenant = T, name = N,
    by default the variable's name, and roles = ["admin"]): the tenants and the names of the
    tokens, and the admins'."""
    tokens: dict[str, str] = {}
    names: dict[str, str] = {}
    admins: set[str] = set()
    table = auth.get("tokens") or {}
    if not isinstance(table, Mapping):
        raise ConfigError('[auth.tokens] must be a table of "token" = "tenant"')
    for token, tenant in table.items():
        tokens[_token(token, "[auth.tokens]")] = _tenant(tenant, "[auth.tokens]")
    entries = auth.get("token") or []
    if not isinstance(entries, list):
        raise ConfigError('[[auth.token]] must be an array of tables: env = "NAME", tenant = "T"')
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("env"), str):
            raise ConfigError('each [[auth.token]] needs env = "VARIABLE" and tenant = "T"')
        name = entry["env"]
        value = os.environ.get(name)
        if not value:
            raise ConfigError(f"[[auth.token]]: the variable {name} is not set (or empty)")
        token = _token(value, f"[[auth.token]] {name}")
        tokens[token] = _tenant(entry.get("tenant"), f"[[auth.token]] {name}")
        named = entry.get("name", name)
        if not isinstance(named, str) or not named.strip():
            raise ConfigError(f"[[auth.token]] {name}: the name must be a non-empty string")
        names[token] = named
        roles = entry.get("roles", [])
        if not isinstance(roles, list) or not set(roles) <= {"admin"}:
            raise ConfigError(f'[[auth.token]] {name}: roles must be a list of "admin"')
        if "admin" in roles:
            admins.add(token)
    return tokens, names, frozenset(admins)


def _token(token: Any, where: str) -> str:
    if not isinstance(token, str) or len(token) < 16 or token != token.strip():
        raise ConfigError(f"{where}: a token must be a string of at least 16 characters")
    return token


def _tenant(tenant: Any, where: str) -> str:
    if not isinstance(tenant, str) or not tenant.strip():
        raise ConfigError(f"{where}: the tenant must be a non-empty string")
    return tenant


@functools.cache
def version() -> str:
    """The installed loopwright's version (the document's, and `/health`'s)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("loopwright")
    except PackageNotFoundError:
        return "unknown"
