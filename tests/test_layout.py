"""The package's shape, read from its syntax trees: one class name means one thing, and no
module imports itself round a circle (module-level, in a function or under `TYPE_CHECKING`:
all three count)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "loopwright"
TREES = {p: ast.parse(p.read_text()) for p in sorted(SRC.rglob("*.py"))}

SAME_NAME = {
    "Session": {"events.py", "session.py"},
}
"""Public names two modules must both keep: the `session` event's class is the CamelCase of its
wire type (test_events), and `loopwright.Session` is the conversation."""


def test_one_class_name_one_meaning() -> None:
    where: dict[str, set[str]] = defaultdict(set)
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                where[node.name].add(path.relative_to(SRC).as_posix())
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert twice == SAME_NAME


def test_run_loop_reads_as_the_loop() -> None:
    """`run_loop` tells the story in at most 60 lines (issue 30): each thing it does is a named
    step of `Steps`."""
    tree = TREES[SRC / "loop.py"]
    (loop,) = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "run_loop"]
    assert loop.end_lineno is not None
    assert loop.end_lineno - loop.lineno + 1 <= 60
