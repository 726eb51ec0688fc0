"""The lock (`constraints.txt`) agrees with `pyproject.toml`: every requirement of the package, of
its extras and of its dependency groups (`test`: the development tools) is pinned there, to a
version the requirement allows. A requirement changed without `bash scripts/lock` fails here
rather than as an install that quietly ignores the lock."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt pins exact versions only: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_requirement_is_locked_to_a_version_it_allows() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    requirements = [*project["dependencies"]]
    for extra in [
        *project["optional-dependencies"].values(),
        *pyproject["dependency-groups"].values(),
    ]:
        requirements += [r for r in extra if isinstance(r, str)]  # (not an `include-group`)
    pins = locked()
    checked = 0
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "loopwright":  # an extra naming other extras
            continue
        assert name in pins, f"{requirement.name} is not in constraints.txt: run bash scripts/lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pins[name]}, outside {requirement}: "
            "run bash scripts/lock"
        )
        checked += 1
    assert checked >= 30, checked
