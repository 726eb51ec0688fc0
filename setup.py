"""The build as pyproject.toml describes it, plus one step: the repository's `examples/` folder
(the one source of the examples: the docs, the tests and `loopwright serve --project examples`
read it there) is copied into the wheel as `loopwright/examples/`, so that `loopwright demo`
works from an installed package. An editable install (`pip install -e .`) skips the copy: the
demo finds the folder next to `src/` (src/loopwright/cli/demo.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

EXAMPLES = Path(__file__).resolve().parent / "examples"


def left_out(folder: str, names: list[str]) -> set[str]:
    """What running the examples leaves behind (examples/.gitignore: the store, the writer's
    notes) and Python's caches: never shipped."""
    skip = {"__pycache__", ".loopwright", ".pytest_cache"}
    if folder.endswith("writer/workspace"):
        skip.add("release-notes")
    return {name for name in names if name in skip or name.endswith((".pyc", ".pyo"))}


class BuildWithExamples(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / "loopwright" / "examples"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(EXAMPLES, target, ignore=left_out)


setup(cmdclass={"build_py": BuildWithExamples})
