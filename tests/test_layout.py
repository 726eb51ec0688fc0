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


DOORS = ("server", "cli", "acp", "notify")
"""The doors: what people and programs come in through. Each goes through the runtime."""

FROM_THE_STORE = {
    # values the runtime answers with (and what names them), and the store's errors, which a
    # door turns into its answer (an HTTP status, an exit code)
    "store": {"PendingRecord", "StoredEvent", "StoreError", "StaleWriter"},
    "store.log": {
        *("Page", "SessionKey", "SessionRecord", "SESSION_ID_RULE", "valid_session_id"),
        *("Store", "is_postgres"),  # the log a door opens and hands to the runtime, as held
    },
    "store.opening": {"open_log", "log_at"},  # (opening it)
    "store.usage_report": {"UsageQuery", "GROUPS", "groups"},
    "store.usage": {"as_json", "cost_text", "line", "GROUPS"},  # usage as JSON and as text
    "store.sql": {"iso"},  # a time as the store writes it
    "store.pg_schema": {"shown"},  # a database named without its password
    # the notification outbox's values (the worker reaches the outbox through the runtime)
    "store.outbox": {"Delivery", "AttemptOutcome", "Outbox"},
}
"""What a door may import from the store, by module (issue 30 point 4): values and pure
functions of them, errors, and opening the log."""


def _seam() -> set[str]:
    """The methods of the event log's seam: those of the protocols in `store/log.py`."""
    tree = TREES[SRC / "store" / "log.py"]
    protocols = [
        n
        for n in tree.body
        if isinstance(n, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in n.bases)
    ]
    return {
        f.name
        for c in protocols
        for f in c.body
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def test_the_doors_go_through_the_runtime() -> None:
    """The server, the CLI, the editor adapter and notifications import only value types from
    the store (`FROM_THE_STORE`), and call the event log only to close it (a door that opened
    the log closes it): every read and write of a session goes through the runtime
    (`runtime.reading` serves the reads). A call on the log is one on an expression named
    `log` (a name, or an attribute: `self.log.read(...)`, `state.runtime.log.pending(...)`)."""
    seam = _seam() - {"close"}
    assert {"read", "pending_item", "append", "decide", "sessions"} <= seam  # (found)
    imported, called = [], []
    for path, tree in TREES.items():
        if path.relative_to(SRC).parts[0] not in DOORS:
            continue
        name, where = _module(path), path.relative_to(SRC).as_posix()
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                module = module.removeprefix("loopwright.")
                if module == "store" or module.startswith("store."):
                    imported += [
                        f"{where}:{node.lineno} {module}.{a.name}"
                        for a in node.names
                        if a.name not in FROM_THE_STORE.get(module, ())
                    ]
            elif isinstance(node, ast.Import):
                imported += [
                    f"{where}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("loopwright.store")
                ]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in seam
            ):
                target = node.func.value
                named = target.attr if isinstance(target, ast.Attribute) else None
                if isinstance(target, ast.Name):
                    named = target.id
                if named == "log":
                    called.append(f"{where}:{node.lineno} {ast.unparse(node.func)}")
    past = imported + called
    assert not past, "doors past the runtime (importing from the store, calling the log):\n" + (
        "\n".join(past)
    )
