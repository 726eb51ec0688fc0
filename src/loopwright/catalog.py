"""What we know about the models people use: context window, output limit and prices, so each
usage record has a cost and the budget knows the window. Unknown models still work: no cost, and
the agent's own `context_budget`.

Prices are US dollars per million tokens (input, output, cache read, cache write), as published
by the vendors; check them against the vendor's page before relying on a bill.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from .messages import Usage


@dataclass(frozen=True, slots=True)
class ModelInfo:
    context_window: int
    max_output: int
    input: float
    """Dollars per million input tokens."""
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Usage) -> float:
        plain_input = max(
            0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        )
        dollars = (
            plain_input * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000
        return round(dollars, 8)


CATALOG: dict[str, ModelInfo] = {
    # Anthropic
    "claude-opus-4-1": ModelInfo(200_000, 32_000, 15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-5": ModelInfo(200_000, 64_000, 3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4": ModelInfo(200_000, 64_000, 3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": ModelInfo(200_000, 64_000, 1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": ModelInfo(200_000, 8_192, 0.8, 4.0, 0.08, 1.0),
    # OpenAI
    "gpt-5": ModelInfo(400_000, 128_000, 1.25, 10.0, 0.125),
    "gpt-5-mini": ModelInfo(400_000, 128_000, 0.25, 2.0, 0.025),
    "gpt-5-nano": ModelInfo(400_000, 128_000, 0.05, 0.4, 0.005),
    "gpt-4.1": ModelInfo(1_047_576, 32_768, 2.0, 8.0, 0.5),
    "gpt-4.1-mini": ModelInfo(1_047_576, 32_768, 0.4, 1.6, 0.1),
    "gpt-4o": ModelInfo(128_000, 16_384, 2.5, 10.0, 1.25),
    "gpt-4o-mini": ModelInfo(128_000, 16_384, 0.15, 0.6, 0.075),
    "o3": ModelInfo(200_000, 100_000, 2.0, 8.0, 0.5),
    "o4-mini": ModelInfo(200_000, 100_000, 1.1, 4.4, 0.275),
    # DeepSeek
    "deepseek-chat": ModelInfo(128_000, 8_000, 0.27, 1.1, 0.07),
    "deepseek-reasoner": ModelInfo(128_000, 64_000, 0.55, 2.19, 0.14),
    # Google (OpenAI-compatible endpoint)
    "gemini-2.5-pro": ModelInfo(1_048_576, 65_536, 1.25, 10.0, 0.31),
    "gemini-2.5-flash": ModelInfo(1_048_576, 65_536, 0.3, 2.5, 0.075),
    # Moonshot, Zhipu
    "kimi-k2": ModelInfo(131_072, 16_384, 0.6, 2.5, 0.15),
    "glm-4.5": ModelInfo(128_000, 96_000, 0.6, 2.2, 0.11),
}


@cache
def lookup(model: str) -> ModelInfo | None:
    """The catalog entry for a model name; dated or tagged variants match their base name
    (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`, `openai/gpt-5` → `gpt-5`)."""
    name = model.rsplit("/", 1)[-1].lower()
    best = None
    for known, info in CATALOG.items():
        if (name == known or name.startswith(known + "-") or name.startswith(known + ":")) and (
            best is None or len(known) > len(best[0])
        ):
            best = (known, info)
    return best[1] if best else None


def with_cost(model: str, usage: Usage) -> Usage:
    """The usage with its cost filled in when the model's prices are known."""
    info = lookup(model)
    if info is None or usage.cost is not None:
        return usage
    from dataclasses import replace

    return replace(usage, cost=info.cost(usage))
