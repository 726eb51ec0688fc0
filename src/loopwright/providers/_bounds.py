"""How much one reply may stream on our side (RELIABILITY P10). A stream that never ends is cut
by the request's deadline, but one that sends fast fills memory well before it: 64 KB deltas
reached a gigabyte in six seconds."""

from __future__ import annotations

from typing import Any

from ..models import ModelFailure

MAX_REPLY_CHARS = 4_000_000
"""Characters of text, thinking and tool arguments one reply may stream: about a million tokens,
past every model's output limit."""


class Tally:
    """Counts what a reply streamed; `over` gives the failure that ends it past the bound."""

    __slots__ = ("chars",)

    def __init__(self) -> None:
        self.chars = 0

    def over(self, item: Any) -> ModelFailure | None:
        delta = getattr(item, "delta", None)
        if type(delta) is str:
            self.chars += len(delta)
            if self.chars > MAX_REPLY_CHARS:
                return ModelFailure(
                    error=f"the reply streamed over {MAX_REPLY_CHARS:,} characters: stopped",
                    retryable=False,
                )
        return None
