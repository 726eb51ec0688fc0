"""The model catalog: names, windows, output limits and prices from catalog.json (generated from
genai-prices), and the cost of a request — checked against the dataset's own calculation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib.resources import files

import pytest
from genai_prices import Usage as DatasetUsage
from genai_prices import calc_price

from loopwright.messages import Usage
from loopwright.models.catalog import DEFAULT_OUTPUT, bundled, lookup, source, with_cost

DATA = json.loads(files("loopwright.models").joinpath("catalog.json").read_text())
GENERATED = datetime.fromisoformat(DATA["generated"]).replace(tzinfo=UTC)


def test_current_models_are_known_with_windows_and_output_limits():
    expected = {
        "claude-sonnet-4-5-20250929": ("claude-sonnet-4-5", 200_000, 64_000),
        "claude-opus-4-1": ("claude-opus-4-1", 200_000, 32_000),
        "claude-haiku-4-5": ("claude-haiku-4-5", 200_000, 64_000),
        "claude-opus-4-6": ("claude-opus-4-6", 1_000_000, 128_000),
        "gpt-5": ("gpt-5", 400_000, 128_000),
        "openai/gpt-5-mini": ("gpt-5-mini", 400_000, 128_000),
        "gpt-5.2": ("gpt-5.2", 400_000, 128_000),
        "gpt-4.1": ("gpt-4.1", 1_000_000, 32_768),
        "o4-mini": ("o4-mini", 200_000, 100_000),
        "deepseek-chat": ("deepseek-chat", 64_000, 8_000),
        "gemini-2.5-pro": ("gemini-2.5-pro", 1_048_576, 65_536),  # (window hand-kept)
        "kimi-k2": ("kimi-k2", 131_072, 16_384),
        "glm-4.5": ("GLM-4.5", 128_000, 96_000),
    }
    for name, (model_id, window, output) in expected.items():
        info = lookup(name)
        assert info is not None, name
        assert (info.id, info.context_window, info.max_output) == (model_id, window, output), name
    newest = lookup("claude-sonnet-5")  # in the dataset, not in the hand-kept output limits
    assert newest is not None and newest.max_output == DEFAULT_OUTPUT
    assert lookup("my-own-model") is None and lookup("claude-next") is None
    assert source() == f"genai-prices 0.2.5 (MIT), {DATA['generated']}"


def test_cost_is_tokens_times_prices_with_cache_reads_and_writes():
    # claude-haiku-4-5: $1 in, $5 out, $0.10 cache read, $1.25 cache write per million
    usage = Usage(
        input_tokens=10_000, output_tokens=2_000, cache_read_tokens=6_000, cache_write_tokens=1_000
    )
    priced = with_cost("claude-haiku-4-5", usage)
    assert priced.cost == pytest.approx((3_000 * 1 + 2_000 * 5 + 6_000 * 0.1 + 1_000 * 1.25) / 1e6)
    # gpt-5-mini prices no cache writes: they cost what input does
    priced = with_cost("gpt-5-mini", usage)
    assert priced.cost == pytest.approx(
        (3_000 * 0.25 + 2_000 * 2 + 6_000 * 0.025 + 1_000 * 0.25) / 1e6
    )
    assert with_cost("my-own-model", usage).cost is None
    assert with_cost("gpt-5", Usage(input_tokens=1, output_tokens=1, cost=0.5)).cost == 0.5


def test_a_tier_prices_every_token_once_the_input_passes_it():
    """claude-sonnet-4-5 costs $3/$15 up to 200,000 input tokens, $6/$22.50 past them."""
    below = Usage(input_tokens=200_000, output_tokens=1_000)
    above = Usage(input_tokens=200_001, output_tokens=1_000)
    assert lookup("claude-sonnet-4-5").cost(below) == pytest.approx(0.6 + 0.015)
    assert lookup("claude-sonnet-4-5").cost(above) == pytest.approx(200_001 * 6e-6 + 0.0225)


def dataset_cost(name: str, usage: Usage) -> tuple[str, float] | None:
    try:
        result = calc_price(
            DatasetUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
            ),
            name,
            genai_request_timestamp=GENERATED,
        )
    except LookupError:
        return None
    return result.model.id, float(result.total_price)


USAGES = [
    Usage(input_tokens=1_234, output_tokens=567),
    Usage(input_tokens=50_000, output_tokens=4_000, cache_read_tokens=30_000),
    Usage(
        input_tokens=300_000,
        output_tokens=9_000,
        cache_read_tokens=100_000,
        cache_write_tokens=20_000,
    ),
]


def names() -> list[str]:
    """Every model id in the file, and the names people write (dated, routed, tagged)."""
    ids = [m["id"] for p in DATA["providers"] for m in p["models"]]
    return [*ids, "claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "gpt-5-2025-08-07"]


@pytest.mark.parametrize("name", names())
def test_the_catalog_prices_every_model_as_the_dataset_does(name: str):
    """For each name the dataset resolves (without a provider): the same model and, for each
    usage, the same cost (a model priced in other units only, audio hours say, has none here;
    units these usages do not use, web searches say, cost nothing in either). The bundled file,
    at its day: `lookup` asks the installed genai-prices first (tests/test_prices.py)."""
    info = bundled(name)
    for usage in USAGES:
        theirs = dataset_cost(name, usage)
        if theirs is None:
            continue
        assert info is not None and info.id == theirs[0]
        ours = info.cost(usage)
        if ours is not None or theirs[1] != 0:
            assert ours == pytest.approx(theirs[1], rel=1e-9, abs=1e-8), usage
