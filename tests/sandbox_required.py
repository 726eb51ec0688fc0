"""Whether the sandbox's tests can run here: they need bubblewrap (and the allow-list's, curl).
Without them a test module skips, with the reason, unless `LOOPWRIGHT_REQUIRE_SANDBOX=1`
(scripts/test sets it once it installed both): then a missing one fails the tests, so a CI run
never passes by skipping them."""

from __future__ import annotations

import os
import shutil

import pytest


def needs(*programs: str) -> pytest.MarkDecorator:
    """A module's mark: skip without `programs`, or fail when the run requires the sandbox."""
    missing = [p for p in programs if shutil.which(p) is None]
    if missing and os.environ.get("LOOPWRIGHT_REQUIRE_SANDBOX") == "1":
        raise RuntimeError(f"LOOPWRIGHT_REQUIRE_SANDBOX=1 but {', '.join(missing)} not found")
    return pytest.mark.skipif(bool(missing), reason=f"needs {' and '.join(programs)}")
