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
    "Session": {"events.py", "loop/session.py"},
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
    tree = TREES[SRC / "loop" / "loop.py"]
    (loop,) = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "run_loop"]
    assert loop.end_lineno is not None
    assert loop.end_lineno - loop.lineno + 1 <= 60


def _module(path: Path) -> str:
    parts = ["loopwright", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the modules it imports anywhere in it: at module level, inside functions and
    under `if TYPE_CHECKING:` alike. `from package import name` imports the submodule `name`
    when there is one, else the package (its `__init__`)."""
    modules = {_module(path): path for path in TREES}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(TREES[path]):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                targets = [f"{module}.{alias.name}" for alias in node.names] + [module]
                targets = [t for t in targets[:-1] if t in modules] or [module]
            else:
                continue
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycles() -> None:
    found = [[m.removeprefix("loopwright.") for m in c] for c in circles(import_graph())]
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)
