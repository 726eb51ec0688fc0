"""Secrets out of everything that leaves the process or is stored (RELIABILITY P11).

Two kinds of text are replaced by `MARKER` (`[redacted]`):

- **the secrets in use**, registered by value in one process-wide registry: a provider's API key
  when its model is made or its key is read from the environment (`providers.Endpoint.api_key`,
  `providers._client.ClientModel`), the server's bearer tokens when its settings are built
  (`server.settings.ServerSettings`). Anyone may `register` more. Values shorter than
  `MIN_LENGTH` characters are not registered (they would match ordinary words);
- **well-known key shapes** (`SHAPES`), whoever's they are: OpenAI/Anthropic/OpenRouter-style
  `sk-…` keys (with a digit in them, so a kebab-case word is not one), Stripe `sk_live_…`, AWS
  access key ids `AKIA…`/`ASIA…`, GitHub `ghp_…`/`gho_…`/`ghu_…`/`ghs_…`/`ghr_…` and
  `github_pat_…`, Slack `xoxb-…`/`xoxp-…`/…, Google `AIza…`, JSON Web Tokens, PEM private key
  blocks, and the token after `Bearer ` (kept: `Bearer [redacted]`).

Where: `loopwright.wire` is the one JSON serialisation of events and messages, and every exit
goes through it — the event log of both backends (`wire.dumps`, which the store's rows call),
HTTP bodies, `/events`, SSE frames and their replay, `sessions export`, the CLI's JSON lines
(`wire.to_dict`), session snapshots (`wire.messages_to_json`; `snapshots.to_snapshot` screens the
rest of its state). Beside it: the store's pending rows (args, reason, answer, note),
the HTTP answer's `text`/`error` (read from `done` itself) and the CLI's human lines. Logs go
through the application's handlers: `LogFilter` redacts them.

What is *not* redacted: events as in-process Python consumers see them (a `Session`'s stream,
hooks, `RunResult.events`, `session.messages`) keep raw values — only what leaves the process or
is stored is redacted. Consequences: a session resumed from the log sees the redacted text (the
model's history; a call that paused for approval, resumed from the log, whose arguments held a
secret is denied, never run on the redacted values: `holds_marker`), and a text is redacted piece by piece where it travels in pieces — a token delta on a
live stream, a `message:partial` (what a reply added since the last one) — so a secret split
across two pieces is not caught in them; the `message:completed` that ends them is.

Cost: one exact pattern, and one screen per anchor (a character that starts a shape, or the
rarest of a secret's), compiled again only when the registry changes. A JSON document is
screened first — for each anchor it holds, one fast literal scan — and only a document that may
hold a secret is decoded, redacted string by string and encoded again (`json_text`). Measured
in bench/redact.py: 1-4 µs more per typical event.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any, TypeAlias

MARKER = "[redacted]"
MIN_LENGTH = 8
"""Registered values shorter than this are ignored."""

_TOKEN = r"[A-Za-z0-9._~+/=-]{16,}"
_KEYCHAR = "[A-Za-z0-9_-]"
_B64 = _KEYCHAR + "{8,}"
_Screen: TypeAlias = "tuple[str, re.Pattern[str]]"
_WORD = "(?<![A-Za-z0-9_].)"
"""After a shape's first character: that it does not continue a word (`task-…` holds no key)."""

SHAPES: tuple[tuple[str, str, str], ...] = (
    (
        "openai-style",
        "s" + _WORD + rf"k-(?={_KEYCHAR}*[0-9]){_KEYCHAR}{{20,}}",
        rf"-(?<=sk-){_KEYCHAR}{{20}}",
    ),
    ("stripe", "s" + _WORD + r"k_(?:live|test)_[A-Za-z0-9]{16,}", "_(?<=sk_)(?:live|test)_"),
    (
        "stripe-restricted",
        "r" + _WORD + r"k_(?:live|test)_[A-Za-z0-9]{16,}",
        "_(?<=rk_)(?:live|test)_",
    ),
    ("aws-access-key-id", "A" + _WORD + r"KIA[A-Z0-9]{16}(?![A-Za-z0-9])", "AKIA[A-Z0-9]{16}"),
    ("aws-temporary-key-id", "A" + _WORD + r"SIA[A-Z0-9]{16}(?![A-Za-z0-9])", "ASIA[A-Z0-9]{16}"),
    ("github", "g" + _WORD + r"h[pousr]_[A-Za-z0-9]{36,}", "_(?<=gh[pousr]_)[A-Za-z0-9]{36}"),
    ("github-fine-grained", "g" + _WORD + r"ithub_pat_[A-Za-z0-9_]{22,}", "_(?<=github_pat_)"),
    ("slack", "x" + _WORD + r"ox[abposr]-[A-Za-z0-9-]{10,}", "-(?<=xox[abposr]-)"),
    ("google", "A" + _WORD + r"Iza[0-9A-Za-z_-]{35}", "AIza[0-9A-Za-z_-]{35}"),
    ("jwt", "e" + _WORD + rf"yJ{_B64}\.eyJ{_B64}\.{_B64}", rf"J(?<=eyJ){_B64}\.eyJ"),
    ("bearer", "Bearer " + _TOKEN, "Bearer " + _TOKEN),
    ("bearer-lower", "bearer " + _TOKEN, "bearer " + _TOKEN),
    ("bearer-upper", "BEARER " + _TOKEN, "BEARER " + _TOKEN),
    (
        "private-key",
        r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----(?:.|\n)*?-----END (?:[A-Z]+ )*PRIVATE KEY-----",
        "-(?<=-----)BEGIN ",
    ),
)
"""(name, pattern, screen) of the well-known key shapes redacted wherever they appear. The
screen is a looser pattern found wherever the shape may be in a JSON document (`\\nsk-…` is a
key after a newline there); it starts with its anchor, a character rarer in text than most."""

_lock = threading.Lock()
_secrets: set[str] = set()  # process-wide: logs and every door must never show them


def _compile(secrets: Iterable[str]) -> tuple[re.Pattern[str], tuple[_Screen, ...]]:
    """`exact` finds what to replace in a string; the screens find, in a JSON document,
    everything `exact` could find in its strings once decoded (and a little more): one pattern
    per anchor, each starting with it (a literal first character makes `re` scan fast)."""
    ordered = sorted(secrets, key=len, reverse=True)  # a secret before any prefix of it
    exact = [re.escape(s) for s in ordered] + [shape for _, shape, _ in SHAPES]
    forms = {json.dumps(s, ensure_ascii=False)[1:-1] for s in ordered} | set(ordered)
    rests: dict[str, list[str]] = {}
    for anchor, rest in [_anchored(form) for form in forms] + [(s[0], s[1:]) for *_, s in SHAPES]:
        rests.setdefault(anchor, []).append(rest)
    screens = tuple(
        (anchor, re.compile(re.escape(anchor) + "(?:" + "|".join(rest) + ")"))
        for anchor, rest in rests.items()
    )
    return re.compile("|".join(exact)), screens


_FREQUENT = ' etaoinsrhldcu"m:,fpgwyb.v0123456789-_k{}x[]jqz'
"""Characters by how often they appear in events' JSON, the most frequent first."""


def _anchored(secret: str) -> tuple[str, str]:
    """(anchor, rest) for `secret`: its rarest character, and the pattern of the rest (looking
    behind for what comes before the anchor)."""
    at = max(range(len(secret)), key=lambda i: _FREQUENT.find(secret[i]) % 100)  # -1: rarest
    head = f"(?<={re.escape(secret[: at + 1])})" if at else ""
    return secret[at], head + re.escape(secret[at + 1 :])


_exact, _screens = _compile(())


def register(*values: str | None) -> None:
    """Redact these values from now on, in this process (empty, short or known ones are
    ignored; the patterns are compiled again only when one is new)."""
    global _exact, _screens
    new = {v for v in values if v and len(v) >= MIN_LENGTH and v.strip()} - _secrets
    if not new:
        return
    with _lock:
        _secrets.update(new)
        _exact, _screens = _compile(_secrets)


def registered() -> frozenset[str]:
    """The values registered so far."""
    return frozenset(_secrets)


def forget(*values: str) -> None:
    """Stop redacting these registered values (for tests; shapes stay)."""
    global _exact, _screens
    with _lock:
        _secrets.difference_update(values)
        _exact, _screens = _compile(_secrets)


def text(value: str) -> str:
    """`value` with every registered secret and well-known key shape replaced by `MARKER` (the
    screens first: most text holds none)."""
    return _exact.sub(_replace, value) if may_hold(value) else value


def head(value: str, n: int) -> str:
    """`value[:n]`, cut before a secret the cut would split (what is kept of it would no longer
    be found, so redaction downstream would let it through)."""
    if len(value) > n and may_hold(value):
        for found in _exact.finditer(value):
            if found.start() >= n:
                break
            if found.end() > n:
                return value[: found.start()]
    return value[:n]


def tail(value: str, n: int) -> str:
    """The last `n` characters of `value` (at most), starting after a secret the cut would split
    (as `head` does at its end)."""
    start = max(0, len(value) - n)
    if start and may_hold(value):
        for found in _exact.finditer(value):
            if found.start() >= start:
                break
            if found.end() > start:
                start = found.end()
    return value[start:]


def _replace(match: re.Match[str]) -> str:
    found = match.group()
    return found[:7] + MARKER if found[:7].lower() == "bearer " else MARKER


def deep(value: Any) -> Any:
    """A copy of a JSON value (dicts, lists, strings, scalars) with `text` applied to every
    string, keys included."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {deep(k): deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep(v) for v in value]
    return value


def holds_marker(value: Any) -> bool:
    """Whether a JSON value holds `MARKER` in a string: arguments read back from the log whose
    secrets were redacted are not the ones the model gave."""
    return MARKER in json.dumps(value, default=str)


def may_hold(document: str) -> bool:
    """Whether a JSON document (or any text) may hold something to redact; never a miss. For
    each anchor in it (a `str.find`), one search."""
    for anchor, screen in _screens:
        if anchor in document and screen.search(document) is not None:
            return True
    return False


def json_text(document: str) -> str:
    """A compact JSON document redacted: itself when the screens find nothing, else decoded,
    redacted string by string and encoded again (compact, UTF-8 as it is)."""
    if not may_hold(document):
        return document
    return json.dumps(deep(json.loads(document)), ensure_ascii=False, separators=(",", ":"))


class LogFilter(logging.Filter):
    """Redacts log records as they pass (their message, and the traceback once formatted):
    `handler.addFilter(loopwright.redact.LogFilter())` on the handlers that write your logs.
    Logging is configured by the application, so nothing attaches it for you."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = text(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = text(record.exc_text)
        return True
