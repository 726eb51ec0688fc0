"""Regenerate src/loopwright/models/catalog.json, the bundled price snapshot, from the newest
genai-prices (the price dataset pydantic maintains).

    pip install --upgrade genai-prices   # into any environment: loopwright does not need it to run
    python scripts/update_catalog.py     # writes src/loopwright/models/catalog.json

The file keeps, for the providers loopwright has presets for (and a few more first-party ones),
each model's id, how names match it (the dataset's own match rules), its context window and its
text-token prices in force at the start of today (UTC): input, output, cache read, cache write, each a number or a
base with tiers (a price that changes past N input tokens); the conversions are the ones the
catalog uses at run time when genai-prices is installed (src/loopwright/models/prices.py).
Output limits are not in the dataset: they stay hand-kept in catalog.py. Run it when the dataset
has a new release, check the diff, and bump the version pinned in pyproject.toml's `test` group
and constraints.txt (tests/test_catalog.py compares the file's costs with the dataset's own at
that version, tests/test_prices.py its entries with the dataset's).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from genai_prices import data_snapshot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # (this clone's loopwright, whichever is installed)

from loopwright.models.prices import clause, model  # noqa: E402

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
OUT = ROOT / "src" / "loopwright" / "models" / "catalog.json"


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
    # the prices in force at the start of today (UTC), the day the file names: a price by time
    # of day (DeepSeek's off-peak one) is the one at midnight, whenever the script runs
    now = datetime.combine(datetime.now(tz=UTC).date(), time(), tzinfo=UTC)
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
