"""Approval links: signed, expiring URLs of the server's confirmation page for one open item.

A link opens a page (`GET /links/<token>`) that shows the call and asks; only the page's form
(`POST /links/<token>`) decides, through the runtime's single-use authority — so a link scanner
that follows every URL of a message decides nothing. `?action=approve|deny|answer` only picks
the button the page puts first.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import redact
from ..store import PendingRecord
from ..store.outbox import Outbox
from .config import NotifySettings
from .signing import mint

KEY_NAME = "approval-links"
"""The name of the generated link key in the database's `notify_keys`."""


async def link_key(settings: NotifySettings, outbox: Outbox) -> str:
    """The key links are signed with: `[notify] link_secret_env`'s value, else one generated
    once and stored in the event log's database (every process on it signs alike)."""
    if settings.link_secret is not None:
        return settings.link_secret
    key = await outbox.key(KEY_NAME, secrets.token_urlsafe(32))
    redact.register(key)
    return key


@dataclass(frozen=True, slots=True)
class Links:
    """Makes an open item's links (page, approve, deny, or answer)."""

    base_url: str
    key: str
    ttl: float
    clock: Callable[[], float] = field(default=time.time)

    def token(self, item: PendingRecord) -> str:
        return mint(item.tenant, item.id, self.clock() + self.ttl, self.key)

    def of(self, item: PendingRecord) -> dict[str, str]:
        page = f"{self.base_url}/links/{self.token(item)}"
        actions = ("answer",) if item.kind == "question" else ("approve", "deny")
        return {"page": page} | {action: f"{page}?action={action}" for action in actions}
