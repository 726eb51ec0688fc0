"""bench/RESULTS.md is written by five scripts, each owning its sections (`## ` headings):
run.py the first, callgrind.py "## Instructions", http_bench.py "## HTTP server", imports.py
"## Start-up (callgrind)", http_peers.py "## HTTP peer"."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(heading: str, section: str) -> None:
    """Replace the section under `heading` (up to the next `## `) in RESULTS.md, or append it."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    text, found = pattern.subn(lambda _: section.rstrip("\n") + "\n\n", text)
    if not found:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + section
    RESULTS.write_text(text.rstrip("\n") + "\n")
