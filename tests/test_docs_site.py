"""The documentation site builds: `mkdocs build --strict` over docs/ (`mkdocs.yml`) into a
temporary folder, offline, with no warning (a broken link or a docstring mkdocstrings cannot
read fails it). The pages are there: the index, every guide in the nav, the Python API
reference with known docstrings (read from the source by griffe), the HTTP API page, the
changelog (CHANGELOG.md, included) and the release steps."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = Path(sys.executable).with_name("mkdocs")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html" if name else site / "index.html").read_text()


def test_the_site_has_its_pages(site: Path) -> None:
    assert "a Python runtime for AI agents" in page(site, "")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    guides = next(entry["Guides"] for entry in config["nav"] if "Guides" in entry)
    listed = sorted(next(iter(g.values())) for g in guides)
    on_disk = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert set(listed) | {"index.md", "changelog.md", "releasing.md"} == set(on_disk)
    for guide in listed:
        assert (site / guide.removesuffix(".md") / "index.html").is_file(), guide
    assert "git tag -a vX.Y.Z" in page(site, "releasing")
    changelog = page(site, "changelog")
    assert "Unreleased" in changelog and "0.1.0" in changelog


def test_the_python_reference_is_made_from_the_docstrings(site: Path) -> None:
    from loopwright.agent import Agent
    from loopwright.runtime import Runtime

    reference = page(site, "reference/python")
    text = re.sub(r"<[^>]+>", "", reference)
    for documented in (Agent, Runtime):
        assert documented.__doc__ is not None
        first = documented.__doc__.split(".")[0].replace("`", "")  # ("Everything that ...")
        assert first in text, documented
    for anchor in ('id="loopwright.agent.Agent"', 'id="loopwright.events.ToolStarted"'):
        assert anchor in reference
    assert 'id="loopwright.runtime.Runtime"' in reference
    assert "/openapi.json" in page(site, "reference/http")


def test_the_site_loads_nothing_from_elsewhere(site: Path) -> None:
    """Its scripts and styles are its own files (the theme's highlight.js CDN is off)."""
    for html in site.rglob("*.html"):
        text = html.read_text()
        assert 'src="http' not in text and "cdnjs" not in text, html
