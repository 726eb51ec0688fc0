"""Retries of model requests: bounded by attempts and backoff, honouring `retry-after`
(SPEC §3.8). Tools are never re-run here: only the model request is sent again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from . import events as ev
from .agent import RetryPolicy
from .models import Model, ModelFailure, ModelRequest


async def stream_reply(
    model: Model, request: ModelRequest, policy: RetryPolicy, partial: list[str]
) -> AsyncIterator[Any]:
    """Stream one reply, retrying retryable failures within the policy's bounds (SPEC §3.8).

    Text already streamed before a failure rides into the retry as a note, so nothing shown is
    lost. Ends with the `MessageCompleted` or, past the bound, the last `ModelFailure`.
    """
    for attempt in range(policy.attempts + 1):
        failure: ModelFailure | None = None
        async for item in model.stream(request):
            if type(item) is ev.TextDelta:
                partial.append(item.delta)
            elif isinstance(item, ModelFailure):
                failure = item
                break
            yield item
        if failure is None:
            return
        if not failure.retryable or attempt == policy.attempts:
            yield failure
            return
        delay = min(policy.max_delay, failure.retry_after or policy.backoff * (attempt + 1))
        yield ev.ModelRetry(attempt=attempt + 1, error=failure.error, delay=delay)
        await asyncio.sleep(delay)
        if partial:
            note = f"[Your previous attempt was cut off after: {''.join(partial)}]"
            request = replace(request, notes=(*request.notes, note))


class ModelFailed(Exception):
    """Raised inside the loop when a reply failed past the retry bound."""

    def __str__(self) -> str:
        return f"model request failed: {self.args[0]}"
