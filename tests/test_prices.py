"""Prices kept current: the catalog asks the installed genai-prices first (the `prices` extra),
with the snapshot bundled as catalog.json as the fallback; the snapshot agrees with the dataset
the test environment pins (so a new release without a regenerated snapshot fails here)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from importlib.resources import files
from typing import Any

import pytest
from genai_prices import data_snapshot, types

from loopwright.messages import Usage
from loopwright.models import catalog, prices

DATA = json.loads(files("loopwright.models").joinpath("catalog.json").read_text())
GENERATED = datetime.fromisoformat(DATA["generated"]).replace(tzinfo=UTC)


@pytest.fixture(autouse=True)
def fresh_lookups() -> Iterator[None]:
    catalog.lookup.cache_clear()
    yield
    data_snapshot.set_custom_snapshot(None)
    catalog.lookup.cache_clear()


def test_the_snapshot_is_the_installed_dataset_on_its_day():
    """Every model of the kept providers, in both, alike: id, match rules, context window and
    prices (as the dataset had them at the start of the file's day). A new genai-prices release
    that adds, drops or reprices a model fails here until `scripts/update_catalog.py` runs."""
    assert DATA["source"] == f"genai-prices {version('genai-prices')} (MIT)"
    ours = {(p["id"], m["id"]): m for p in DATA["providers"] for m in p["models"]}
    kept = {p["id"] for p in DATA["providers"]}
    theirs = {
        (p.id, m.id): prices.model(m, GENERATED)
        for p in data_snapshot.get_snapshot().providers
        if p.id in kept
        for m in p.models
    }
    assert sorted(theirs.keys() - ours.keys()) == []  # new in the dataset
    assert sorted(ours.keys() - theirs.keys()) == []  # gone from it
    differ = [key for key in ours if ours[key] != theirs[key]]
    assert differ == []
    assert len(ours) == 346


def test_the_snapshot_prices_what_genai_prices_0_2_5_added():
    """Five models genai-prices 0.2.3 did not have (the catalog was generated from it)."""
    for name, window, price in [
        ("gpt-6.2-astra", 1_050_000, (8.0, ((272_000, 16.0),))),
        ("gpt-6.2-sol", 1_050_000, (2.0, ((272_000, 4.0),))),
        ("gemini-4-carbon", 1_048_576, 4),
        ("gemini-4-hydrogen", 1_048_576, 1.5),
        ("gemini-4-neon", 1_048_576, 3),
    ]:
        info = catalog.bundled(name)
        assert info is not None and (info.id, info.context_window, info.input) == (
            name,
            window,
            price,
        )


def test_lookup_asks_the_installed_dataset_first():
    """A snapshot of genai-prices whose gpt-5 costs $7/$70: `lookup` prices with it, the
    bundled file still with its own; a name the dataset's providers do not claim falls back."""
    real = data_snapshot.get_snapshot()
    openai = next(p for p in real.providers if p.id == "openai")
    gpt5 = next(m for m in openai.models if m.id == "gpt-5")
    dearer = dataclasses.replace(
        gpt5, prices=types.ModelPrice(input_mtok=Decimal("7"), output_mtok=Decimal("70"))
    )
    models = [dearer if m is gpt5 else m for m in openai.models]
    data_snapshot.set_custom_snapshot(
        data_snapshot.DataSnapshot(
            providers=[dataclasses.replace(openai, models=models)], from_auto_update=False
        )
    )
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    assert catalog.with_cost("openai/gpt-5-2025-08-07", usage).cost == 7 + 7
    assert catalog.bundled("gpt-5").cost(usage) == 1.25 + 1.0  # ($1.25 in, $10 out)
    # claude is not in that snapshot: the bundled file prices it
    assert catalog.lookup("claude-haiku-4-5") == catalog.bundled("claude-haiku-4-5")


def test_prices_by_time_of_day_are_the_datasets_at_run_time():
    """DeepSeek's off-peak prices (16:30 to 00:30 UTC) are half its day prices: the installed
    dataset prices each request at its hour; the snapshot holds the prices of its day's 00:00."""
    day = GENERATED.replace(hour=12)
    assert prices.entry("deepseek-chat", day)["prices"] == {
        "input": 0.27,
        "output": 1.1,
        "cache_read": 0.07,
    }
    night = prices.entry("deepseek-chat", GENERATED.replace(hour=20))
    assert night is not None and night["prices"] == {
        "input": 0.135,
        "output": 0.55,
        "cache_read": 0.035,
    }
    assert catalog.bundled("deepseek-chat").input == 0.135


class Broken:
    """A dataset whose lookups fail as an incompatible release would."""

    def find_provider_model(self, *args: Any) -> Any:
        raise AttributeError("'ModelInfo' object has no attribute 'prices'")


def test_a_dataset_that_cannot_price_is_logged_and_the_snapshot_prices(caplog):
    data_snapshot.set_custom_snapshot(Broken())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="loopwright.models.prices"):
        assert catalog.lookup("gpt-5") == catalog.bundled("gpt-5")
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "loopwright.models.prices",
            "WARNING",
            "genai-prices could not price 'gpt-5'; the bundled catalog does",
        )
    ]


def loads(code: str) -> list[Any]:
    """What a fresh process prints (one JSON value per line)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_without_genai_prices_the_snapshot_prices_and_scripted_models_never_load_it():
    with_it = loads(
        "import json, sys\n"
        "from loopwright.models.catalog import lookup\n"
        "print(json.dumps([lookup('demo.yaml'), 'genai_prices' in sys.modules]))\n"
        "print(json.dumps([lookup('gpt-6.2-sol').id, 'genai_prices' in sys.modules]))\n"
    )
    assert with_it == [[None, False], ["gpt-6.2-sol", True]]
    without = loads(
        "import json, sys\n"
        "sys.modules['genai_prices'] = None  # (not installed)\n"
        "from loopwright.models.catalog import bundled, lookup\n"
        "print(json.dumps([lookup('gpt-6.2-sol') == bundled('gpt-6.2-sol'), lookup('gpt-5').input]))\n"
    )
    assert without == [[True, 1.25]]
