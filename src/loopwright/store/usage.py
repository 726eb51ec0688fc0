"""Usage as people read it: the stored per-request usage rows (`store.usage_report`) as JSON
for `GET /usage` and as lines for the CLI (`loopwright usage`, `sessions show`)."""

from __future__ import annotations

from typing import Any

GROUPS = ("agent", "session", "day", "model")
"""What usage can be grouped by (`store.usage_report`, `loopwright usage --by`)."""
NAMES = {
    "requests": "requests",
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cache_read_tokens": "cacheReadTokens",
    "cache_write_tokens": "cacheWriteTokens",
    "cost": "cost",
    "unpriced": "unpricedRequests",
}


def as_json(group: dict[str, Any]) -> dict[str, Any]:
    """A group in the HTTP API's names (camelCase)."""
    return {NAMES.get(k, k): v for k, v in group.items()}


def cost_text(cost: float | None, unpriced: int) -> str:
    """`$0.0123`, `$0.0123 (2 requests without a price)`, or `no price known`."""
    if cost is None:
        return "no price known"
    text = f"${cost:,.4f}"
    if unpriced:
        text += f" ({unpriced} request{'s' if unpriced != 1 else ''} without a price)"
    return text


def line(group: dict[str, Any]) -> str:
    """One line: requests, tokens and cost (what `sessions show` prints)."""
    n = group["requests"]
    tokens = f"{group['input_tokens']:,} in · {group['output_tokens']:,} out"
    cached = group["cache_read_tokens"] + group["cache_write_tokens"]
    if cached:
        tokens += f" · {group['cache_read_tokens']:,} cache read"
        tokens += f" · {group['cache_write_tokens']:,} cache write"
    cost = cost_text(group["cost"], group["unpriced"]) if n else "$0"
    return f"{n} model request{'s' if n != 1 else ''} · {tokens} · {cost}"
