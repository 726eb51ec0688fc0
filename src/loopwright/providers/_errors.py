"""Vendor SDK exceptions as our data: every API failure becomes a `ModelFailure` saying whether a
retry may help (SPEC §3.8). Nothing here raises."""

from __future__ import annotations

import re
from typing import Any

from ..models import ModelFailure

TOO_LONG = re.compile(
    r"prompt is too long|too many tokens|maximum context length|context_length_exceeded|"
    r"context window|input length|exceeds the maximum|reduce the length",
    re.IGNORECASE,
)


def failure_from(exc: BaseException) -> ModelFailure:
    """Classify an exception raised by the `openai` or `anthropic` SDK (or the stream)."""
    status: int | None = getattr(exc, "status_code", None)
    text = _message(exc)
    name = type(exc).__name__
    if status is None:
        # connection refused/reset, read timeout, a stream cut mid-way, unparsable chunks
        retryable = name not in ("AuthenticationError", "PermissionDeniedError")
        return ModelFailure(error=f"{name}: {text}", retryable=retryable)
    if status in (400, 413) and TOO_LONG.search(text):
        return ModelFailure(error=f"prompt too long: {text}", prompt_too_long=True)
    retryable = status in (408, 409, 429) or status >= 500
    return ModelFailure(
        error=f"HTTP {status}: {text}",
        retryable=retryable,
        retry_after=_retry_after(exc) if retryable else None,
    )


def _message(exc: BaseException) -> str:
    body: Any = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(exc) or type(exc).__name__


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name in ("retry-after-ms", "retry-after"):
        value = headers.get(name)
        if value:
            try:
                seconds = float(value)
            except ValueError:
                return None
            return seconds / 1000 if name == "retry-after-ms" else seconds
    return None
