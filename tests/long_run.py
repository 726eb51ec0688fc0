"""The suite's two lengths, as a pytest plugin (pyproject's addopts load it: `-p long_run`).

By default every test whose work grows with a number (the OpenAPI fuzz, the property tests, the
crash cycles) runs a bounded number of cases, so that `bash scripts/test` stays a few minutes.
`pytest --long` (or `bash scripts/test --long`) runs only those tests, marked `long` or written
with Hypothesis, each at its long bound; CI runs the default suite, then the long run once.

A test picks its bound with `examples(quick, long)`; a Hypothesis test that names no
`max_examples` gets the long profile's count under `--long`.

Both lengths load a profile that never fails a test for the machine's speed: no per-example
deadline, and no "input generation is slow" health check (the suite runs on busy machines).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, is_hypothesis_test, settings

LONG_PROFILE_EXAMPLES = 1000
SPEED_FREE = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

_long = False


def examples(quick: int, long: int) -> int:
    """This run's bound: `quick` by default, `long` under `--long`."""
    return long if _long else quick


def is_long() -> bool:
    """This is the long run (`--long`): for a test that runs only then (skipped by default)."""
    return _long


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        help="the long run: only the tests that scale (marked long, and the Hypothesis tests), "
        "each with its long number of cases",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _long
    _long = bool(config.getoption("long"))
    config.addinivalue_line(
        "markers", "long: the test scales with examples(); `--long` runs it at its long bound"
    )
    settings.register_profile("quick", **SPEED_FREE)
    settings.register_profile("long", max_examples=LONG_PROFILE_EXAMPLES, **SPEED_FREE)
    settings.load_profile("long" if _long else "quick")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _long:
        return
    keep, drop = [], []
    for item in items:
        function = getattr(item, "obj", None)
        scales = item.get_closest_marker("long") or is_hypothesis_test(function)
        (keep if scales else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
