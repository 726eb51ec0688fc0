"""Notifications: people hear of pending items wherever they are, and decide from a link.

- `config`: `[notify]` in loopwright.toml (webhooks, their secrets' variables, link settings);
- `store.outbox`: the durable outbox a pause writes its notice to, in its own commit;
- `worker`: the task that fans notices out to the webhooks, sends, retries, records attempts;
- `webhook`: the signed POST (`X-Loopwright-Signature: sha256=<hex HMAC of the raw body>`);
- `message`: the body; `links` and `signing`: the approval links' tokens;
- the server serves the links' confirmation pages (`server.links`) and `GET /notifications`.

`start` makes the server's worker from the project's settings and the plugins' notifiers
(`plugins.Notifier`): None when there are neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..plugins import Notifier
from ..runtime.reading import Reading
from .config import EVENTS, NotifySettings, Webhook
from .links import Links, link_key
from .signing import SIGNATURE_HEADER, signature, verify
from .webhook import Sent, WebhookNotifier
from .worker import Deliverer

__all__ = [
    "EVENTS",
    "SIGNATURE_HEADER",
    "Deliverer",
    "Links",
    "Notifier",
    "NotifySettings",
    "Sent",
    "Webhook",
    "WebhookNotifier",
    "links_for",
    "signature",
    "start",
    "verify",
]


async def links_for(settings: NotifySettings, runtime: Reading, default_base: str) -> Links:
    """The links of this project's server (`[notify] base_url`, else `default_base`)."""
    key = await link_key(settings, runtime.outbox)
    return Links(settings.base_url or default_base, key, settings.link_ttl)


async def start(
    project_settings: Mapping[str, Any],
    runtime: Reading,
    default_base: str,
    *,
    extra: Sequence[Notifier] | None = None,
    **options: Any,
) -> Deliverer | None:
    """The running delivery worker of a server over its `runtime` (a `Runtime`): to the
    `[[notify.webhook]]` targets and the notifiers `extra` (by default every installed plugin's);
    None when there are none."""
    settings = NotifySettings.from_project(project_settings)
    if extra is None:
        from ..plugins import notifiers as plugin_notifiers

        extra = plugin_notifiers()
    names = [w.name for w in settings.webhooks] + [n.name for n in extra]
    if len(set(names)) != len(names):
        raise ConfigError(f"two notifiers share a name (webhooks and plugins): {sorted(names)}")
    if not names:
        return None
    notifiers: list[Notifier] = [WebhookNotifier(hook) for hook in settings.webhooks]
    notifiers += extra
    links = await links_for(settings, runtime, default_base)
    deliverer = Deliverer(runtime, notifiers, settings, links, **options)
    deliverer.start()
    return deliverer
