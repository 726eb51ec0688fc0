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
goes through it — the event log of both backends (`wire.dumps`), checkpoints, HTTP bodies,
`/events`, SSE frames and their replay, `sessions export` and the CLI's JSON lines
(`wire.to_dict`). The HTTP answer's `text`/`error` (read from `done` itself) is redacted with
`text`. What is *not* redacted: events as in-process Python consumers see them (a `Session`'s
stream, hooks, `RunResult.events`) keep raw values — only what leaves the process or is stored
is redacted. Consequences: a session resumed from the log sees the redacted text (the model's
history, and the arguments of a call that paused for approval), and a token delta streamed live
is redacted on its own, so a secret split across two deltas is not caught in them (the stored
`message:completed` and every replay are).

Cost: one compiled pattern (re-compiled only when the registry changes). A JSON document is
first screened with a loose pattern in one `search`; only a document that may hold a secret is
decoded, redacted string by string and encoded again (`json_text`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from typing import Any

MARKER = "[redacted]"
MIN_LENGTH = 8
"""Registered values shorter than this are ignored."""

_TOKEN = r"[A-Za-z0-9._~+/=-]{16,}"
_WORD = "(?<![A-Za-z0-9_].)"
"""After a shape's first character: that it does not continue a word (`task-…` holds no key)."""

SHAPES: tuple[tuple[str, str, str], ...] = (
    (
        "openai-style",
        "s" + _WORD + r"k-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}",
        r"k(?<=sk)-[A-Za-z0-9_-]{20}",
    ),
    ("stripe", "s" + _WORD + r"k_(?:live|test)_[A-Za-z0-9]{16,}", "k(?<=sk)_(?:live|test)_"),
    (
        "stripe-restricted",
        "r" + _WORD + r"k_(?:live|test)_[A-Za-z0-9]{16,}",
        "k(?<=rk)_(?:live|test)_",
    ),
    ("aws-access-key-id", "A" + _WORD + r"KIA[A-Z0-9]{16}(?![A-Za-z0-9])", "AKIA[A-Z0-9]{16}"),
    ("aws-temporary-key-id", "A" + _WORD + r"SIA[A-Z0-9]{16}(?![A-Za-z0-9])", "ASIA[A-Z0-9]{16}"),
    ("github", "g" + _WORD + r"h[pousr]_[A-Za-z0-9]{36,}", "_(?<=gh[pousr]_)[A-Za-z0-9]{36}"),
    ("github-fine-grained", "g" + _WORD + r"ithub_pat_[A-Za-z0-9_]{22,}", "_(?<=github_)pat_"),
    ("slack", "x" + _WORD + r"ox[abposr]-[A-Za-z0-9-]{10,}", "xox[abposr]-"),
    ("google", "A" + _WORD + r"Iza[0-9A-Za-z_-]{35}", "AIza[0-9A-Za-z_-]{35}"),
    (
        "jwt",
        "e" + _WORD + r"yJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        r"J(?<=eyJ)[A-Za-z0-9_-]{8,}\.eyJ",
    ),
    ("bearer", "Bearer " + _TOKEN, "Bearer " + _TOKEN),
    ("bearer-lower", "bearer " + _TOKEN, "bearer " + _TOKEN),
    ("bearer-upper", "BEARER " + _TOKEN, "BEARER " + _TOKEN),
    (
        "private-key",
        r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----(?:.|\n)*?-----END (?:[A-Z]+ )*PRIVATE KEY-----",
        "B(?<=-----B)EGIN ",
    ),
)
"""(name, pattern, screen) of the well-known key shapes redacted wherever they appear. The
screen is a looser pattern found wherever the shape may be in a JSON document (`\\nsk-…` is a
key after a newline there); it starts with a character rare in text, which lets `re` skip to
the places where one may start."""

_lock = threading.Lock()
_secrets: set[str] = set()


def _compile(secrets: Iterable[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(exact, screen): `exact` finds what to replace in a string; `screen` finds, in a JSON
    document, everything `exact` could find in its strings once decoded (and a little more)."""
    ordered = sorted(secrets, key=len, reverse=True)  # a secret before any prefix of it
    exact = [re.escape(s) for s in ordered]
    exact += [shape for _, shape, _ in SHAPES]
    loose = {re.escape(json.dumps(s, ensure_ascii=False)[1:-1]) for s in ordered}
    loose |= {re.escape(s) for s in ordered}
    screen = sorted(loose, key=len, reverse=True)
    screen += [loose for _, _, loose in SHAPES]
    return re.compile("|".join(exact)), re.compile("|".join(screen))


_exact, _screen = _compile(())


def register(*values: str | None) -> None:
    """Redact these values from now on, in this process (empty, short or known ones are
    ignored; the pattern is compiled again only when one is new)."""
    global _exact, _screen
    new = {v for v in values if v and len(v) >= MIN_LENGTH and v.strip()} - _secrets
    if not new:
        return
    with _lock:
        _secrets.update(new)
        _exact, _screen = _compile(_secrets)


def registered() -> frozenset[str]:
    """The values registered so far."""
    return frozenset(_secrets)


def forget(*values: str) -> None:
    """Stop redacting these registered values (for tests; shapes stay)."""
    global _exact, _screen
    with _lock:
        _secrets.difference_update(values)
        _exact, _screen = _compile(_secrets)


def text(value: str) -> str:
    """`value` with every registered secret and well-known key shape replaced by `MARKER`."""
    return _exact.sub(_replace, value)


def _replace(match: re.Match[str]) -> str:
    found = match.group()
    return found[:7] + MARKER if found[:7].lower() == "bearer " else MARKER


def deep(value: Any) -> Any:
    """A copy of a JSON value (dicts, lists, strings, scalars) with `text` applied to every
    string, keys included."""
    if isinstance(value, str):
        return _exact.sub(_replace, value)
    if isinstance(value, dict):
        return {deep(k): deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep(v) for v in value]
    return value


def clean(value: Any) -> bool:
    """Whether a JSON value holds nothing to redact (the screen on each string; never wrong
    when it says True)."""
    if isinstance(value, str):
        return _screen.search(value) is None
    if isinstance(value, dict):
        return all(clean(k) and clean(v) for k, v in value.items())
    if isinstance(value, list):
        return all(clean(v) for v in value)
    return True


def may_hold(document: str) -> bool:
    """Whether a JSON document may hold something to redact (one `search`; never a miss)."""
    return _screen.search(document) is not None


def json_text(document: str) -> str:
    """A compact JSON document redacted: itself when the screen finds nothing, else decoded,
    redacted string by string and encoded again (compact, UTF-8 as it is)."""
    if _screen.search(document) is None:
        return document
    return json.dumps(deep(json.loads(document)), ensure_ascii=False, separators=(",", ":"))
