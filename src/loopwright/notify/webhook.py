"""The webhook notifier: one signed POST of a notification's JSON body.

    POST <url>
    Content-Type: application/json
    X-Loopwright-Signature: sha256=<hex HMAC-SHA256 of the raw body with the secret>
    X-Loopwright-Delivery: <the delivery id>

A 2xx answer delivers it. 408, 425, 429, 5xx and no answer at all (refused, timed out) are tried
again later; any other answer (the receiver refuses this body: 400, 401, 404, 410...) gives up.

An attempt has one deadline, the webhook's `timeout`, for all of it: connecting, sending, and the
whole answer (httpx's own timeouts are per read: a receiver trickling a byte at a time would hold
the attempt forever). The answer is streamed and at most `ANSWER_BYTES` of its body are read; the
rest is never read (the connection is closed instead of kept for the next POST).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .config import Webhook, public_name
from .signing import SIGNATURE_HEADER, signature

RETRIED = frozenset({408, 425, 429})
ANSWER_BYTES = 16_384
"""Bytes of an answer's body read at most (the answer's status is what counts)."""


@dataclass(frozen=True, slots=True)
class Sent:
    """How one attempt went: `ok`, or whether trying again may help (`retry`)."""

    ok: bool
    status: int | None = None
    error: str | None = None
    retry: bool = False


def encode(message: Mapping[str, Any]) -> bytes:
    """The raw body: what is signed is exactly what is sent."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class WebhookNotifier:
    """A `Notifier` posting to one configured webhook (`[[notify.webhook]]`)."""

    def __init__(self, hook: Webhook, client: Any | None = None) -> None:
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - the extra is part of `test`
            raise ConfigError(
                f"webhooks need httpx ({exc}): pip install 'loopwright[notify]'"
            ) from None
        self.hook, self.name, self.events = hook, hook.name, hook.events
        self._client = client or httpx.AsyncClient(timeout=hook.timeout, follow_redirects=False)
        self._owns = client is None

    async def send(self, message: Mapping[str, Any]) -> Sent:
        import httpx

        body = encode(message)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(body, self.hook.secret),
            "X-Loopwright-Delivery": str(message.get("deliveryId", "")),
            "User-Agent": "loopwright-webhook",
        }
        request = self._client.build_request("POST", self.hook.url, content=body, headers=headers)
        try:
            async with asyncio.timeout(self.hook.timeout):
                answer = await self._client.send(request, stream=True)
                try:
                    await _read_some(answer, ANSWER_BYTES)
                finally:
                    await answer.aclose()
        except TimeoutError:
            error = f"no whole answer within the timeout ({self.hook.timeout:g} s)"
            return Sent(False, error=error, retry=True)
        except httpx.HTTPError as exc:  # (cut by the worker, once redacted)
            said = str(exc).replace(self.hook.url, public_name(self.hook.url))
            return Sent(False, error=f"{type(exc).__name__}: {said}", retry=True)
        code = answer.status_code
        if 200 <= code < 300:
            return Sent(True, code)
        return Sent(False, code, f"HTTP {code}", retry=code >= 500 or code in RETRIED)

    async def close(self) -> None:
        if self._owns:
            await self._client.aclose()


async def _read_some(answer: Any, limit: int) -> int:
    """Reads at most about `limit` bytes of the streamed `answer`'s body (one chunk over it at
    most); returns how many."""
    read = 0
    async for chunk in answer.aiter_raw():
        read += len(chunk)
        if read >= limit:
            break
    return read
