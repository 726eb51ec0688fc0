"""Retries of model requests: bounded by attempts, backoff (honouring `retry-after`) and a
per-request deadline (SPEC §3.8: the loop wraps each request in `asyncio.timeout`, and a request
past it fails as retryable). Only the model request is sent again — tools never re-run — and
text an attempt had already streamed rides into the next one as a note, so nothing shown is
lost."""

from __future__ import annotations

from . import events as ev
from .agent import RetryPolicy
from .models import ModelFailure


def next_retry(
    policy: RetryPolicy, failure: ModelFailure, failures: int, spent: int = 0
) -> ev.ModelRetry | None:
    """The retry to make after `failures` earlier failures of this request (and `spent`
    retries of the run), or None when the failure is not retryable or a bound is reached."""
    if not failure.retryable or failures >= policy.attempts or spent >= policy.budget:
        return None
    delay = min(policy.max_delay, failure.retry_after or policy.backoff * (failures + 1))
    return ev.ModelRetry(attempt=failures + 1, error=failure.error, delay=delay)


def partial_note(partial: list[str]) -> str:
    return f"[Your previous attempt was cut off after: {''.join(partial)}]"


class ModelFailed(Exception):
    """Raised inside the loop when a reply failed past the retry bound."""

    def __str__(self) -> str:
        return f"model request failed: {self.args[0]}"
