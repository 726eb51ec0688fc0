"""Vendor SDK exceptions as our data: every API failure becomes a `ModelFailure` saying whether a
retry may help (SPEC §3.8). Nothing here raises."""

from __future__ import annotations

import re
from typing import Any

from ..models import ModelFailure
from ._keys import KeyUnavailable

TOO_LONG = re.compile(
    r"prompt is too long|too many tokens|maximum context length|context_length_exceeded|"
    r"context window|input length|exceeds the maximum|reduce the length|"
    # llama.cpp: "request (6576 tokens) exceeds the available context size (4096 tokens)",
    # type exceed_context_size_error; Ollama: "prompt too long; exceeded max context length",
    # "the input length exceeds the context length"; vLLM: "This model's maximum context
    # length is 4096 tokens. However, you requested 6576 tokens ..."
    r"exceeds? the available context|exceed_context_size|context size|"
    r"max(imum)? context length|prompt too long|exceeds the context length",
    re.IGNORECASE,
)


NOT_RETRIED = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "billing_error",
        "invalid_api_key",
        "insufficient_quota",
    }
)
"""Error types and codes a provider sends in a stream (with no HTTP status of their own) that
no retry can help: the request or the account is wrong, not the moment."""


def failure_from(exc: BaseException) -> ModelFailure:
    """Classify an exception raised by the `openai` or `anthropic` SDK (or the stream), or a
    key that could not be had (`_keys`)."""
    if isinstance(exc, KeyUnavailable):
        return ModelFailure(error=f"no API key: {exc}", retryable=exc.retryable)
    status: int | None = getattr(exc, "status_code", None)
    text = _message(exc)
    name = type(exc).__name__
    if status is None:
        # connection refused/reset, read timeout, a stream cut mid-way, unparsable chunks, or
        # an error the provider sent inside the stream (its type and code say what it is)
        said = kinds(exc)
        if said and TOO_LONG.search(text):
            return ModelFailure(error=f"prompt too long: {text}", prompt_too_long=True)
        refused = name in ("AuthenticationError", "PermissionDeniedError") or said & NOT_RETRIED
        return ModelFailure(error=f"{name}: {text}", retryable=not refused)
    if status in (400, 413) and TOO_LONG.search(text):
        return ModelFailure(error=f"prompt too long: {text}", prompt_too_long=True)
    retryable = status in (408, 409, 429) or status >= 500
    return ModelFailure(
        error=f"HTTP {status}: {text}",
        retryable=retryable,
        retry_after=_retry_after(exc) if retryable else None,
    )


def kinds(exc: BaseException) -> set[str]:
    """The `type` and `code` of the error an exception carries in its body, if any."""
    body: Any = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return set()
    return {str(error[k]) for k in ("type", "code") if error.get(k)}


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
