"""What we know about the models people use: context window, output limit and prices, so each
usage record has a cost and the budget knows the window. Unknown models still work: no cost, and
the agent's own `context_budget`.

Names, match rules, windows and prices are data from genai-prices (pydantic's maintained price
dataset, MIT): the installed release when the `prices` extra is there (`prices.entry`, for the
names a provider of the snapshot claims), else the snapshot bundled as `catalog.json`, generated
by `scripts/update_catalog.py` and read here with the standard library (no network, nothing
fetched at run time). The dataset has no output limits: those are hand-kept below
(`OUTPUT_LIMITS`), with the windows the dataset lacks. Prices are US dollars per million tokens
as the vendors publish them (a price may change past a number of input tokens: a tier); check
them against the vendor's page before relying on a bill.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from ..messages import Usage
from . import prices

Price = float | tuple[float, tuple[tuple[int, float], ...]]
"""Dollars per million tokens, or (base, ((above N input tokens, price), ...))."""

DEFAULT_OUTPUT = 8_192
"""The output limit of a model whose limit is not known (what Anthropic requests send)."""

OUTPUT_LIMITS: dict[str, int] = {
    # Anthropic
    "claude-opus-4-6": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-opus-4-1": 32_000,
    "claude-opus-4-0": 32_000,
    "claude-sonnet-4-6": 64_000,
    "claude-sonnet-4-5": 64_000,
    "claude-sonnet-4-0": 64_000,
    "claude-haiku-4-5": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-3-5-haiku": 8_192,
    "claude-3-5-sonnet": 8_192,
    # OpenAI
    "gpt-5": 128_000,
    "gpt-4.1": 32_768,
    "gpt-4o": 16_384,
    "o3": 100_000,
    "o4-mini": 100_000,
    # others
    "deepseek-chat": 8_000,
    "deepseek-reasoner": 64_000,
    "gemini-2.5": 65_536,
    "kimi-k2": 16_384,
    "glm-4.5": 96_000,
}
"""Output limits by dataset model id; a key also covers the ids it begins (`gpt-5` covers
`gpt-5-mini` and `gpt-5.2`), the longest key winning. Hand-kept: the dataset has none."""

WINDOWS: dict[str, int] = {"gemini-2.5": 1_048_576, "kimi-k2": 131_072, "glm-4.5": 128_000}
"""Context windows of models the dataset gives none for (matched as `OUTPUT_LIMITS` are)."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    context_window: int | None
    """Tokens of context; None when not known."""
    max_output: int
    """The output limit (`DEFAULT_OUTPUT` when not known)."""
    input: Price | None
    """Dollars per million input tokens. A price not given costs nothing (an embedding model
    prices no output), as in the dataset; with neither input nor output priced, no cost."""
    output: Price | None
    cache_read: Price | None = None
    """None: cache reads cost what input does (OpenAI prices no cache writes)."""
    cache_write: Price | None = None
    id: str = ""
    """The dataset's id of the model."""

    def cost(self, usage: Usage) -> float | None:
        """The request's cost: cached input at its own prices where known, the rest of the
        input (`input_tokens` counts all of it) at the input price, output (reasoning included)
        at the output price; each price at the tier the request's input tokens reach."""
        if self.input is None and self.output is None:
            return None
        total = usage.input_tokens
        read, write = usage.cache_read_tokens, usage.cache_write_tokens
        given = self.input if self.input is not None else 0.0
        dollars = (
            max(0, total - read - write) * _at(given, total)
            + usage.output_tokens * _at(self.output if self.output is not None else 0.0, total)
            + read * _at(self.cache_read if self.cache_read is not None else given, total)
            + write * _at(self.cache_write if self.cache_write is not None else given, total)
        )
        return round(dollars / 1_000_000, 8)


def _at(price: Price, input_tokens: int) -> float:
    """The price in force for a request of `input_tokens` (a tier applies to every token once
    the input is past its start, as the vendors bill it)."""
    if isinstance(price, tuple):
        base, tiers = price
        return next((p for start, p in reversed(tiers) if input_tokens > start), base)
    return price


def _matches(rule: dict[str, Any] | None, name: str) -> bool:
    """The dataset's match rules: one key each (`equals`, `starts_with`, `ends_with`,
    `contains`, `regex`, or a list under `or` / `and`)."""
    if not rule:
        return False
    [(kind, arg)] = rule.items()
    if kind == "or":
        return any(_matches(r, name) for r in arg)
    if kind == "and":
        return all(_matches(r, name) for r in arg)
    if kind == "regex":
        return re.search(arg, name) is not None
    text: str = arg.lower()
    if kind == "equals":
        return name == text
    if kind == "starts_with":
        return name.startswith(text)
    if kind == "ends_with":
        return name.endswith(text)
    if kind == "contains":
        return text in name
    raise ValueError(f"catalog.json: unknown match rule {kind!r}")


@cache
def _data() -> dict[str, Any]:
    text = Path(__file__).with_name("catalog.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def source() -> str:
    """Where the bundled prices come from and when they were taken (`genai-prices 0.2.5 (MIT),
    2026-12-06`)."""
    data = _data()
    return f"{data['source']}, {data['generated']}"


def _by_prefix(table: dict[str, int], model_id: str) -> int | None:
    keys = [k for k in table if model_id == k or model_id.startswith((k + "-", k + "."))]
    return table[max(keys, key=len)] if keys else None


def _price(value: Any) -> Price | None:
    if value is None or isinstance(value, int | float):
        return value
    return (value["base"], tuple((start, p) for start, p in value["tiers"]))


def _info(entry: dict[str, Any]) -> ModelInfo:
    prices, model_id = entry.get("prices", {}), entry["id"].lower()
    return ModelInfo(
        context_window=entry.get("context_window") or _by_prefix(WINDOWS, model_id),
        max_output=_by_prefix(OUTPUT_LIMITS, model_id) or DEFAULT_OUTPUT,
        input=_price(prices.get("input")),
        output=_price(prices.get("output")),
        cache_read=_price(prices.get("cache_read")),
        cache_write=_price(prices.get("cache_write")),
        id=entry["id"],
    )


def _find(providers: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """As genai-prices finds a model without a provider: the first provider whose rule matches
    the name, then its first model whose rule does (then its fallback providers'); failing
    that, the first model of any provider whose rule matches (`glm-4.5`, which the dataset
    prices under Z.ai but whose name leads to Zhipu)."""
    provider = next((p for p in providers if _matches(p["match"], name)), None)
    first = (
        [provider, *(p for p in providers if p["id"] in provider["fallback"])] if provider else []
    )
    for candidates in [*first, *providers]:
        entry: dict[str, Any] | None = next(
            (m for m in candidates["models"] if _matches(m["match"], name)), None
        )
        if entry is not None:
            return entry
    return None


@cache
def lookup(model: str) -> ModelInfo | None:
    """The catalog entry for a model name, matched as the dataset matches names (dated or
    tagged variants match their model: `claude-sonnet-4-5-20250929`; a router's `vendor/`
    prefix is dropped: `openai/gpt-5` is `gpt-5`): the installed genai-prices' entry, with
    today's prices, when a provider of the snapshot claims the name; else the snapshot's."""
    name = model.rsplit("/", 1)[-1].lower()
    claimed = any(_matches(p["match"], name) for p in _data()["providers"])  # (not `scripted:`)
    entry = prices.entry(name) if claimed else None
    return _info(entry) if entry is not None else bundled(model)


def bundled(model: str) -> ModelInfo | None:
    """`lookup` in the bundled snapshot only, genai-prices installed or not."""
    entry = _find(_data()["providers"], model.rsplit("/", 1)[-1].lower())
    return _info(entry) if entry is not None else None


def with_cost(model: str, usage: Usage) -> Usage:
    """The usage with its cost filled in when the model's prices are known."""
    info = lookup(model)
    if info is None or usage.cost is not None:
        return usage
    cost = info.cost(usage)
    return usage if cost is None else replace(usage, cost=cost)
