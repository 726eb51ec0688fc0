"""`[notify]` in loopwright.toml, checked once at start.

    [notify]
    base_url = "https://agents.example.com"   # where links point (default: the server's address)
    link_secret_env = "LOOPWRIGHT_LINK_SECRET" # signs approval links (default: a generated key,
                                               # stored in the event log's database)
    link_ttl = 86400                           # seconds an approval link stays valid
    keep = 604800                              # seconds finished deliveries stay listed
    hold = 60                                  # seconds a claimed delivery is held (a worker
                                               # that dies mid-POST: another posts it after)

    [[notify.webhook]]                         # as many as you like ([notify.webhook]: one)
    url = "https://hooks.example.com/loopwright"
    secret_env = "LOOPWRIGHT_WEBHOOK_SECRET"   # the variable holding the HMAC secret
    events = ["approval", "question", "resolved"]   # default: all three
    name = "ops"                               # names its deliveries (default: the url; listed
                                               # as its origin only: `public_name`)
    timeout = 10                               # seconds for a whole attempt

Secrets are read from the environment only, never from the file: an unset variable is a
`ConfigError` that names it (and never shows a value), and the values are registered with
`redact` so no event or log line carries them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .. import redact
from ..errors import ConfigError

EVENTS = ("approval", "question", "resolved")
"""What a webhook may be told: an approval or a question became pending; an item was resolved."""


@dataclass(frozen=True, slots=True)
class Webhook:
    name: str
    """The target's name in the outbox (its deliveries are kept under it)."""
    url: str
    secret: str
    events: frozenset[str]
    timeout: float = 10.0
    """Seconds for a whole attempt: connecting, sending and the whole answer."""

    def __repr__(self) -> str:  # never the secret
        url = public_name(self.url)  # (a URL's path or query may be its credential)
        return (
            f"Webhook(name={public_name(self.name)!r}, url={url!r}, events={sorted(self.events)})"
        )


@dataclass(frozen=True, slots=True)
class NotifySettings:
    webhooks: tuple[Webhook, ...] = ()
    base_url: str | None = None
    link_secret: str | None = None
    """From `link_secret_env`; None: the key stored in the database (`links.link_key`)."""
    link_ttl: float = 86_400.0
    max_attempts: int = 12
    """Attempts before a delivery is given up (`failed`)."""
    keep: float = 604_800.0
    """Seconds deliveries done with (and their notices) are kept and listed (at least
    `max_age`), then forgotten."""
    hold: float = 60.0
    """Seconds a worker holds a delivery it claimed: one that dies holding it (mid-POST) lets
    another worker post it again after that (at-least-once)."""
    max_age: float = 86_400.0
    """Seconds after which a notice is no longer sent to a webhook that has not seen it (one
    configured later is not flooded with the past), and a delivery not delivered by then is
    given up (`failed`, expired: the outbox does not grow while a receiver is down)."""

    @classmethod
    def from_project(cls, settings: Mapping[str, Any]) -> NotifySettings:
        table = settings.get("notify") or {}
        if not isinstance(table, Mapping):
            raise ConfigError("[notify] in loopwright.toml must be a table")
        hooks = table.get("webhook") or []
        if isinstance(hooks, Mapping):
            hooks = [hooks]
        if not isinstance(hooks, list):
            raise ConfigError("[notify.webhook] must be a table or an array of tables")
        webhooks = tuple(_webhook(hook, n) for n, hook in enumerate(hooks, 1))
        names = [w.name for w in webhooks]
        if len(set(names)) != len(names):
            raise ConfigError("[[notify.webhook]]: two webhooks have the same name (or url)")
        values: dict[str, Any] = {"webhooks": webhooks}
        if "base_url" in table:
            values["base_url"] = _url(table["base_url"], "[notify] base_url").rstrip("/")
        if "link_secret_env" in table:
            values["link_secret"] = _secret(table["link_secret_env"], "[notify] link_secret_env")
        for key in ("link_ttl", "max_age", "hold", "keep"):
            if key in table:
                values[key] = _positive(table[key], f"[notify] {key}")
        if "max_attempts" in table:
            values["max_attempts"] = int(_positive(table["max_attempts"], "[notify] max_attempts"))
        return cls(**values)


def _webhook(hook: Any, n: int) -> Webhook:
    where = f"[[notify.webhook]] #{n}"
    if not isinstance(hook, Mapping):
        raise ConfigError(f"{where} must be a table with url and secret_env")
    unknown = set(hook) - {"url", "secret_env", "events", "name", "timeout"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    url = _url(hook.get("url"), f"{where} url")
    if "secret_env" not in hook:
        raise ConfigError(f'{where} needs secret_env = "VARIABLE" (the HMAC secret\'s variable)')
    secret = _secret(hook["secret_env"], f"{where} secret_env")
    events = hook.get("events", list(EVENTS))
    if not isinstance(events, list) or not events or not set(events) <= set(EVENTS):
        raise ConfigError(f"{where} events must be a non-empty list of {', '.join(EVENTS)}")
    name = hook.get("name", url)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where} name must be a non-empty string")
    timeout = _positive(hook.get("timeout", 10), f"{where} timeout")
    return Webhook(name, url, secret, frozenset(events), timeout)


def public_name(target: str) -> str:
    """A delivery target's name as it may be shown (`GET /notifications`, logs): a name that is a
    URL (an unnamed webhook's) becomes its scheme, host and port — never its path, query or
    credentials, which a Slack-style or `?token=` URL is itself."""
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return target
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # (a port that is not one: not shown)
        port = ""
    return f"{parts.scheme}://{host}{port}/…"


def _url(value: Any, where: str) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{where} must be an http:// or https:// URL")
    return str(value)


def _secret(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where} must name an environment variable")
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"{where}: the variable {name} is not set (or empty)")
    redact.register(value)
    return value


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a positive number")
    if not 0 < value < math.inf:
        raise ConfigError(f"{where} must be a positive number")
    return float(value)
