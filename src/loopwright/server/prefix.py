"""The `/v1` prefix: the whole API again under `/v1`, in the loopengine v1 profile. A v1 client
builds `${baseUrl}/agents/...` and nothing else; given `http://host:8787/v1` as its base URL it
gets v1 bodies and v1 events on every route without asking (`?profile=` is not needed, and
cannot turn it back to `full`).

Also where a path's escapes are decoded for routing: `%2F` (and `%25`) stay escaped in the path
the routes see, so a session id holding `/` is still one path segment; `path_id` decodes it.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from starlette.requests import Request
from starlette.types import Scope

KEPT = re.compile(r"(%2[Ff]|%25)")
PREFIX = "/v1"
V1 = "loopwright.profile.v1"
"""The scope key set on requests that came through the prefix."""


def unprefixed(scope: Scope) -> Scope:
    """The scope routing sees (`front.Front` calls it first, so every later check does): `/v1`
    stripped from the path (and the request marked v1), and `%2F` kept escaped in it. The
    server's own scope when nothing changes, else a copy."""
    path = routing_path(scope)
    v1 = path == PREFIX or path.startswith(PREFIX + "/")
    if not v1 and path == scope["path"]:
        return scope
    scope = dict(scope)
    if v1:
        path = path[len(PREFIX) :] or "/"
        scope[V1] = True
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.startswith(PREFIX.encode()):
            scope["raw_path"] = raw[len(PREFIX) :] or b"/"
    scope["path"] = path
    return scope


def routing_path(scope: Scope) -> str:
    """The request's path with every escape decoded but `%2F` and `%25` (from `raw_path` when
    the server gives it; else the decoded path as it is)."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):
        return str(scope["path"])
    try:
        text = raw.decode("ascii").split("?", 1)[0]
    except UnicodeDecodeError:  # (a server that passes raw bytes: its own decoding stands)
        return str(scope["path"])
    if "%" not in text:  # (nothing to decode: the usual path)
        return text
    parts = KEPT.split(text)  # (the kept escapes at odd places)
    return "".join(p.upper() if i % 2 else unquote(p) for i, p in enumerate(parts))


def path_id(request: Request, key: str = "id") -> str:
    """A path parameter, fully decoded (see `routing_path`)."""
    return unquote(request.path_params[key])


def is_v1(request: Request) -> bool:
    return bool(request.scope.get(V1))
