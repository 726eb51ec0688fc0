"""Retries of model requests: bounded by attempts and backoff, honouring `retry-after`
(SPEC §3.8). Only the model request is sent again — tools never re-run — and text an attempt
had already streamed rides into the next one as a note, so nothing shown is lost."""

from __future__ import annotations

from . import events as ev
from .agent import RetryPolicy
from .models import ModelFailure


def next_retry(policy: RetryPolicy, failure: ModelFailure, failures: int) -> ev.ModelRetry | None:
    """The retry to make after `failures` earlier failures of this request, or None when the
    failure is not retryable or the bound is reached."""
    if not failure.retryable or failures >= policy.attempts:
        return None
    delay = min(policy.max_delay, failure.retry_after or policy.backoff * (failures + 1))
    return ev.ModelRetry(attempt=failures + 1, error=failure.error, delay=delay)


def partial_note(partial: list[str]) -> str:
    return f"[Your previous attempt was cut off after: {''.join(partial)}]"


class ModelFailed(Exception):
    """Raised inside the loop when a reply failed past the retry bound."""

    def __str__(self) -> str:
        return f"model request failed: {self.args[0]}"
