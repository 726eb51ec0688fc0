"""Text made valid where it enters: every string a run keeps must be encodable as UTF-8.

Python strings may hold lone surrogates (U+D800–U+DFFF), which no UTF-8 encoder takes: JSON
decodes `"\\ud800"` to one, `os.listdir` gives one for each byte of a file name that is not UTF-8
(`surrogateescape`), and a model's stream may carry one. Such a string would fail the commit of
the event that holds it. So text is made valid at the edges — the HTTP server's request bodies,
the built-in tools' results (file names), the providers' replies (text and arguments) — with
`valid` (one string) or `valid_data` (a JSON value): a surrogate pair stored as two code points
becomes the character it encodes, and every lone surrogate becomes U+FFFD (the replacement
character `�`), visibly. Text that is valid already is returned as it is (the same object).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar, cast

REPLACEMENT = "\ufffd"
T = TypeVar("T")


def valid(text: str) -> str:
    """`text` with its lone surrogates replaced by U+FFFD (and split pairs joined)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def valid_data(value: T) -> T:
    """A JSON value (dicts, lists, strings, numbers…) or a wire value (an event, a message: a
    dataclass of them) with every string in it, keys too, made `valid`; the value itself when
    nothing needed it."""
    return cast(T, _valid(value))


def _valid(value: Any) -> Any:
    if isinstance(value, str):
        return valid(value)
    if isinstance(value, dict):
        items = [(_valid(k), _valid(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        made = [_valid(item) for item in value]
        if all(a is b for a, b in zip(made, value, strict=True)):
            return value
        return type(value)(made)
    if is_dataclass(value) and not isinstance(value, type):
        changed = {}
        for f in fields(value):
            old = getattr(value, f.name)
            new = _valid(old)
            if new is not old:
                changed[f.name] = new
        return replace(value, **changed) if changed else value
    return value
