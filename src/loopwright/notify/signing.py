"""HMAC-SHA256 signatures: of a webhook's body (the receiver checks it), and of approval links
(the server checks them).

A webhook body is signed as sent: `X-Loopwright-Signature: sha256=<hex HMAC of the raw body>`.

An approval link's token is `<payload>.<signature>`, both base64url without padding: the payload
is the JSON `{"t": tenant, "i": item id, "e": expiry (Unix seconds), "n": nonce}`, the signature
the HMAC of the payload's text under the link key. The token authorises one decision on one item
until it expires; the item's single-use decision makes the token single-use.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Literal

SIGNATURE_HEADER = "X-Loopwright-Signature"


def signature(body: bytes, secret: str) -> str:
    """The header's value for `body`: `sha256=<hex>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(body: bytes, secret: str, header: str) -> bool:
    """Whether `header` is `body`'s signature under `secret` (compared in constant time)."""
    return header.isascii() and hmac.compare_digest(signature(body, secret), header)


@dataclass(frozen=True, slots=True)
class LinkClaim:
    """What a valid link's token names."""

    tenant: str
    item: str
    expires: float


Refusal = Literal["forged", "expired"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(payload: str, key: str) -> str:
    return _b64(hmac.new(key.encode(), payload.encode(), hashlib.sha256).digest())


def mint(tenant: str, item: str, expires: float, key: str) -> str:
    """A token for one item of `tenant`, valid until `expires`."""
    body = {"t": tenant, "i": item, "e": int(expires), "n": secrets.token_hex(4)}
    payload = _b64(json.dumps(body, separators=(",", ":")).encode())
    return f"{payload}.{_mac(payload, key)}"


def check(token: str, key: str, now: float) -> LinkClaim | Refusal:
    """The token's claim, or why it is refused: `forged` (not signed with `key`, or garbled)
    or `expired`."""
    payload, dot, mac = token.partition(".")
    if not (dot and token.isascii()) or not hmac.compare_digest(_mac(payload, key), mac):
        return "forged"
    try:
        body = json.loads(_unb64(payload))
        claim = LinkClaim(str(body["t"]), str(body["i"]), float(body["e"]))
    except (binascii.Error, ValueError, KeyError, TypeError):
        return "forged"
    return "expired" if now >= claim.expires else claim
