"""Images and documents that travel with a message: values that name their bytes by hash.

An `Attachment` is what the history, the events and the log hold: its kind, media type, SHA-256,
size and name (or a URL the provider fetches) — never the bytes, so the event log does not carry
base64 on every event. The bytes ride beside the value (`Attachment.data`, not a field, never
serialised): a value made here holds them; a value read back from a log gets them from the log's
attachment table (content-addressed: the same image twice is stored once). Providers read them
with `data_of` when they build a request.

    image("chart.png"), image(raw_bytes), image("https://example.com/cat.jpg")
    document("report.pdf"), document(b"plain text", media_type="text/plain")
    attachment("any/file")          # an image or a document, by its bytes

Media types are detected from the bytes and a declared type must match them: PNG, JPEG, GIF and
WebP images; PDF and UTF-8 plain-text documents. Each attachment is bounded (`max_bytes()`, 5 MB
unless `LOOPWRIGHT_MAX_ATTACHMENT_BYTES` says otherwise); a bad or oversized one is an
`AttachmentError` before any run starts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeAlias
from urllib.parse import unquote_to_bytes

from .errors import ConfigError
from .state._values import WIRE_CONFIG

Kind: TypeAlias = Literal["image", "document"]
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DOCUMENT_TYPES = ("application/pdf", "text/plain")
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
Source: TypeAlias = "str | Path | bytes"


class AttachmentError(ConfigError):
    """An attachment that cannot be sent: unreadable, of an unsupported type, over the size
    bound, or one a model cannot take (raised before any request)."""


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """An image or a document of a message, by reference (`sha256` and `size`, or `url`).

    Equal attachments are the same content; the bytes are `data` (None when only a URL is known,
    or when the value was read back and not yet resolved)."""

    type: Kind
    media_type: str
    sha256: str | None = None
    size: int | None = None
    name: str | None = None
    url: str | None = None
    """A URL the provider fetches itself (no bytes here, none stored)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = WIRE_CONFIG

    @property
    def data(self) -> bytes | None:
        return self.__dict__.get("_data")

    def with_data(self, data: bytes) -> Attachment:
        """This value holding `data` (the log's reader resolves references with it)."""
        self.__dict__["_data"] = data
        return self

    def describe(self) -> str:
        """How a person (or a text-only client) sees it: `[image: cat.png, image/png, 2.1 kB]`."""
        what = self.name or self.url or (self.sha256 or "")[:12]
        size = f", {_size(self.size)}" if self.size is not None else ""
        return f"[{self.type}: {what}, {self.media_type}{size}]"


IMAGE_TOKENS = 1_600
"""An image's estimated cost in a request: about what Anthropic bills the largest it takes
(OpenAI bills a large image at high detail about half of it)."""


def estimated_chars(items: tuple[Attachment, ...] | None) -> int:
    """What attachments weigh in a request, in characters of text (four a token, as the
    context budget counts): an image `IMAGE_TOKENS`; a plain-text document its bytes; a PDF
    a token for every 25 bytes (text and the page images providers make of it), at least
    `IMAGE_TOKENS`."""
    chars = 0
    for item in items or ():
        size = item.size or 0
        if item.type == "image":
            chars += IMAGE_TOKENS * 4
        elif item.media_type == "text/plain":
            chars += size
        else:
            chars += max(IMAGE_TOKENS, size // 25) * 4
    return chars


def max_bytes() -> int:
    """The bound on one attachment's size (`LOOPWRIGHT_MAX_ATTACHMENT_BYTES`, else 5 MB)."""
    raw = os.environ.get("LOOPWRIGHT_MAX_ATTACHMENT_BYTES")
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"LOOPWRIGHT_MAX_ATTACHMENT_BYTES is not a number: {raw!r}") from None


def image(source: Source, *, media_type: str | None = None, name: str | None = None) -> Attachment:
    """An image from a file path, bytes, an http(s) URL or a `data:` URL."""
    return _make("image", source, media_type, name)


def document(
    source: Source, *, media_type: str | None = None, name: str | None = None
) -> Attachment:
    """A document (PDF or plain text) from a file path, bytes, an http(s) URL or a `data:` URL."""
    return _make("document", source, media_type, name)


def attachment(
    source: Source, *, media_type: str | None = None, name: str | None = None
) -> Attachment:
    """An image or a document, whichever its bytes (or declared type) are."""
    return _make(None, source, media_type, name)


def from_base64(
    kind: Kind | None, data: str, *, media_type: str | None = None, name: str | None = None
) -> Attachment:
    """An attachment from base64 text (the HTTP API's `data`)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentError(f"{_label(name)}: data is not valid base64") from None
    return from_bytes(kind, raw, media_type=media_type, name=name)


def from_bytes(
    kind: Kind | None, data: bytes, *, media_type: str | None = None, name: str | None = None
) -> Attachment:
    """An attachment holding `data`, its type detected (and checked against `media_type`)."""
    label = _label(name)
    _check_size(label, len(data))
    if not data:
        raise AttachmentError(f"{label} is empty")
    found = sniff(data)
    if media_type is not None and media_type.split(";")[0].strip().lower() != found:
        raise AttachmentError(f"{label} is declared {media_type} but its bytes are {found}")
    if found is None:
        raise AttachmentError(
            f"{label}: unsupported type (images: PNG, JPEG, GIF, WebP; documents: PDF, UTF-8 text)"
        )
    found_kind: Kind = "image" if found in IMAGE_TYPES else "document"
    if kind is not None and kind != found_kind:
        raise AttachmentError(f"{label} is {found}, not an {kind}")
    digest = hashlib.sha256(data).hexdigest()
    made = Attachment(type=found_kind, media_type=found, sha256=digest, size=len(data), name=name)
    return made.with_data(data)


def from_url(
    kind: Kind | None, url: str, *, media_type: str | None = None, name: str | None = None
) -> Attachment:
    """An attachment the provider fetches from an http(s) URL (a `data:` URL is decoded)."""
    if url.startswith("data:"):
        head, _, payload = url[5:].partition(",")
        given, _, encoding = head.partition(";")
        try:
            raw = (
                base64.b64decode(payload, validate=True)
                if encoding == "base64"
                else unquote_to_bytes(payload)
            )
        except (binascii.Error, ValueError):
            raise AttachmentError(f"{_label(name)}: a data: URL that does not decode") from None
        return from_bytes(kind, raw, media_type=media_type or given or None, name=name)
    if not url.startswith(("https://", "http://")):
        raise AttachmentError(f"attachment URL must be http(s) or data: ({url[:60]})")
    declared = media_type or _type_by_suffix(url) or ""
    if not declared:
        raise AttachmentError(f"attachment {url}: give its media type (none can be told)")
    found_kind: Kind = "image" if declared in IMAGE_TYPES else "document"
    if declared not in IMAGE_TYPES + DOCUMENT_TYPES or (kind and kind != found_kind):
        raise AttachmentError(f"attachment {url}: unsupported type {declared}")
    return Attachment(type=found_kind, media_type=declared, url=url, name=name)


def split_images(value: Any) -> tuple[Any, tuple[Attachment, ...] | None]:
    """A tool's return value without its attachments, and those attachments: an `Attachment`
    alone, or a list mixing attachments and other values (text, data)."""
    if isinstance(value, Attachment):
        return "", (value,)
    if not isinstance(value, (list, tuple)) or not any(isinstance(v, Attachment) for v in value):
        return value, None
    found = tuple(v for v in value if isinstance(v, Attachment))
    rest = [v for v in value if not isinstance(v, Attachment)]
    return (rest[0] if len(rest) == 1 else rest or ""), found


def data_of(item: Attachment) -> bytes:
    """The bytes of an attachment a provider sends; one read back without them is an error
    (its log lost the row, or the value was made from JSON by hand)."""
    data = item.data
    if data is None:
        raise AttachmentError(f"the bytes of {item.describe()} are not available")
    return data


def b64(item: Attachment) -> str:
    return base64.b64encode(data_of(item)).decode("ascii")


def sniff(data: bytes) -> str | None:
    """The media type of `data` by its leading bytes (UTF-8 text without NULs is text/plain)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "text/plain" if "\x00" not in text else None


def _make(
    kind: Kind | None, source: Source, media_type: str | None, name: str | None
) -> Attachment:
    if isinstance(source, bytes):
        return from_bytes(kind, source, media_type=media_type, name=name)
    if isinstance(source, str) and source.startswith(("https://", "http://", "data:")):
        return from_url(kind, source, media_type=media_type, name=name)
    path = Path(source)
    try:
        size = path.stat().st_size
        _check_size(f"attachment {name or path.name}", size)  # refused before it is read
        data = path.read_bytes()
    except OSError as exc:
        raise AttachmentError(f"cannot read attachment {path}: {exc.strerror}") from None
    return from_bytes(kind, data, media_type=media_type, name=name or path.name)


def _label(name: str | None) -> str:
    return f"attachment {name}" if name else "an attachment"


def _check_size(label: str, size: int) -> None:
    bound = max_bytes()
    if size > bound:
        raise AttachmentError(
            f"{label} is {_size(size)}, over the limit of {_size(bound)} "
            "(LOOPWRIGHT_MAX_ATTACHMENT_BYTES)"
        )


def _type_by_suffix(url: str) -> str | None:
    suffix = url.split("?", 1)[0].rsplit(".", 1)[-1].lower()
    return {
        "png": "image/png",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "gif": "image/gif",
        "webp": "image/webp",
        "pdf": "application/pdf",
        "txt": "text/plain",
    }.get(suffix)


def _size(n: int | None) -> str:
    n = n or 0
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.1f} MB"
