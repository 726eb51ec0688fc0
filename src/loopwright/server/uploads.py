"""The HTTP API's attachments: `POST /agents/NAME/messages` takes `attachments` beside `message`.

    {"message": "What is this?",
     "attachments": [{"type": "image", "mediaType": "image/png", "data": "<base64>",
                      "name": "cat.png"},
                     {"type": "document", "url": "https://example.com/report.pdf"}]}

`message` stays a plain string (v1 clients send only it, unchanged). Each attachment gives `data`
(base64) or an http(s) `url`; `type` (`image` or `document`) and `mediaType` are optional and,
when given, must match the bytes. A bad attachment is a 400, one over the size bound a 413, and
one the agent's model cannot take a 400 naming the model — all before the run starts. The body
as a whole stays under `[server] max_body_bytes` (raise it to send large files: base64 is 4/3 of
the bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..attachments import Attachment, AttachmentError, Kind, from_base64, from_url
from .views import ApiError

SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": 20,
    "description": "Images and documents sent with the message: `data` (base64) or `url`.",
    "items": {
        "type": "object",
        "properties": {
            "type": {"enum": ["image", "document"]},
            "mediaType": {"type": "string"},
            "data": {"type": "string", "description": "The bytes, base64."},
            "url": {"type": "string", "description": "An http(s) URL the provider fetches."},
            "name": {"type": "string"},
        },
    },
}


def attachments_field(data: Mapping[str, Any]) -> tuple[Attachment, ...]:
    """The body's `attachments`, read and checked (400 or 413 when one cannot be sent)."""
    given = data.get("attachments")
    if given is None:
        return ()
    if not isinstance(given, list) or len(given) > 20:
        raise ApiError(400, "attachments must be a list of at most 20 objects")
    return tuple(_one(item, n) for n, item in enumerate(given))


def _one(item: Any, n: int) -> Attachment:
    where = f"attachments[{n}]"
    if not isinstance(item, dict):
        raise ApiError(400, f"{where} must be an object")
    kind, media_type, name = item.get("type"), item.get("mediaType"), item.get("name")
    if kind not in (None, "image", "document"):
        raise ApiError(400, f"{where}.type must be image or document")
    for key, value in (("mediaType", media_type), ("name", name)):
        if value is not None and not isinstance(value, str):
            raise ApiError(400, f"{where}.{key} must be a string")
    body, url = item.get("data"), item.get("url")
    if (body is None) == (url is None) or not isinstance(body or url, str):
        raise ApiError(400, f"{where} needs one of data (base64) or url, a string")
    chosen: Kind | None = kind
    try:
        if isinstance(url, str):
            return from_url(chosen, url, media_type=media_type, name=name)
        return from_base64(chosen, str(body), media_type=media_type, name=name)
    except AttachmentError as exc:
        raise ApiError(413 if "over the limit" in str(exc) else 400, f"{where}: {exc}") from None
