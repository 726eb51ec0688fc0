"""Regenerate src/loopwright/models/catalog.json from genai-prices, the price dataset pydantic maintains.

    pip install genai-prices          # into any environment: loopwright does not need it to run
    python scripts/update_catalog.py  # writes src/loopwright/models/catalog.json

The file keeps, for the providers loopwright has presets for (and a few more first-party ones),
each model's id, how names match it (the dataset's own match rules), its context window and its
text-token prices in force today: input, output, cache read, cache write, each a number or a
base with tiers (a price that changes past N input tokens). Output limits are not in the dataset:
they stay hand-kept in catalog.py. Run it when the dataset has a new release, check the diff,
and bump the version pinned in pyproject.toml's `test` extra (tests/test_catalog.py compares
the file's costs with the dataset's own at that version).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

from genai_prices import data_snapshot, types

PROVIDERS = (
    "anthropic",
    "openai",
    "google",
    "deepseek",
    "moonshotai",
    "zhipuai",
    "zai",
    "x-ai",
    "mistral",
)
"""Dataset provider ids kept, in the dataset's order when written."""
PRICES = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write": "cache_write_mtok",
}
OUT = Path(__file__).resolve().parent.parent / "src" / "loopwright" / "models" / "catalog.json"


def clause(match: Any) -> dict[str, Any]:
    """A match rule as JSON: one key, the rule's kind."""
    if isinstance(match, types.ClauseOr):
        return {"or": [clause(c) for c in match.or_]}
    if isinstance(match, types.ClauseAnd):
        return {"and": [clause(c) for c in match.and_]}
    for kind in ("equals", "starts_with", "ends_with", "contains", "regex"):
        if hasattr(match, kind):
            return {kind: getattr(match, kind)}
    raise TypeError(f"unknown match rule {match!r}")


def number(value: Decimal) -> float | int:
    return int(value) if value == int(value) else float(value)


def price(value: Any) -> Any:
    if isinstance(value, types.TieredPrices):
        return {
            "base": number(value.base),
            "tiers": [[t.start, number(t.price)] for t in value.tiers],
        }
    return number(value)


def model(info: Any, now: datetime) -> dict[str, Any]:
    prices = info.get_prices(now)
    entry: dict[str, Any] = {"id": info.id, "match": clause(info.match)}
    if info.context_window:
        entry["context_window"] = info.context_window
    given = {k: getattr(prices, key) for k, key in PRICES.items()}
    entry["prices"] = {k: price(v) for k, v in given.items() if v is not None}
    return entry


def dumps(data: dict[str, Any]) -> str:
    """JSON with one model per line, so that a new release reads as a short diff."""
    one = json.dumps
    head = ",\n".join(f" {one(k)}: {one(v)}" for k, v in data.items() if k != "providers")
    blocks = []
    for p in data["providers"]:
        models = ",\n".join(f"    {one(m)}" for m in p["models"])
        rest = ", ".join(f"{one(k)}: {one(v)}" for k, v in p.items() if k != "models")
        blocks.append(f'  {{{rest}, "models": [\n{models}\n  ]}}')
    return "{\n" + head + ',\n "providers": [\n' + ",\n".join(blocks) + "\n ]\n}\n"


def main() -> None:
    now = datetime.now(tz=UTC)
    snapshot = data_snapshot.get_snapshot()
    providers = []
    for provider in snapshot.providers:
        if provider.id not in PROVIDERS:
            continue
        providers.append(
            {
                "id": provider.id,
                "match": clause(provider.model_match) if provider.model_match else None,
                "fallback": [p for p in provider.fallback_model_providers or () if p in PROVIDERS],
                "models": [model(m, now) for m in provider.models],
            }
        )
    data = {
        "source": f"genai-prices {version('genai-prices')} (MIT)",
        "generated": now.date().isoformat(),
        "unit": "US dollars per million tokens",
        "providers": providers,
    }
    OUT.write_text(dumps(data))
    count = sum(len(p["models"]) for p in providers)
    print(f"{OUT}: {count} models of {len(providers)} providers")


if __name__ == "__main__":
    main()
