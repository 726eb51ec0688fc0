"""genai-prices (pydantic's price dataset, MIT) in catalog.json's terms: at run time, when the
`prices` extra is installed, the catalog asks it first (`entry`), so a newer release of the
dataset prices a model without a new loopwright; `scripts/update_catalog.py` writes the bundled
snapshot, catalog.json, with the same conversions (`model`).

A model entry is what catalog.json holds: `{"id", "match", "context_window"?, "prices"}`, prices
in dollars per million tokens, each a number or `{"base", "tiers": [[start, price], ...]}`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genai_prices import types

log = logging.getLogger(__name__)

PRICES = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write": "cache_write_mtok",
}
"""catalog.json's price names, and the dataset's (text tokens only)."""


def entry(name: str, when: datetime | None = None) -> dict[str, Any] | None:
    """The installed dataset's entry for a model name (lower case, no `vendor/` prefix), with
    its prices in force `when` (now by default); None when genai-prices is not installed or does
    not know the name. A dataset this code cannot read is logged and treated as not installed."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    try:
        snapshot = data_snapshot.get_snapshot()
        _, info = snapshot.find_provider_model(name, None, None, None)
        return model(info, when or datetime.now(tz=UTC), match=False)
    except LookupError:
        return None
    except Exception:  # (an optional dependency's data or API changed: the snapshot prices)
        log.warning(
            "genai-prices could not price %r; the bundled catalog does", name, exc_info=True
        )
        return None


def model(info: types.ModelInfo, when: datetime, *, match: bool = True) -> dict[str, Any]:
    """A dataset model as a catalog entry, with the prices in force `when`."""
    prices = info.get_prices(when)
    found: dict[str, Any] = {"id": info.id}
    if match:
        found["match"] = clause(info.match)
    if info.context_window:
        found["context_window"] = info.context_window
    given = {k: getattr(prices, key, None) for k, key in PRICES.items()}
    found["prices"] = {k: price(v) for k, v in given.items() if v is not None}
    return found


def clause(match: Any) -> dict[str, Any]:
    """A match rule as JSON: one key, the rule's kind."""
    from genai_prices import types

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
    """A price as JSON: a number, or a base with tiers."""
    if isinstance(value, Decimal):
        return number(value)
    return {"base": number(value.base), "tiers": [[t.start, number(t.price)] for t in value.tiers]}
