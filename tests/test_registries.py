"""No module-level mutable state that a run could write (issue 30, point 7): observers and entered
toolsets belong to whoever runs sessions (a runtime, a session), not to a module.

Read from the AST of every module of the package, five kinds are found, and each one found must
be in `ALLOWED` with its reason (and each entry must still be found, so the list stays true):
- a module-level name bound to a mutable container (a dict, set, list, deque... literal or
  call) that a function mutates (a mutating method, an item assigned or deleted);
- a `global` statement (a function that rebinds a module-level name);
- a function that assigns an attribute of an imported module (`driver.OBSERVE = ...`);
- a `functools.cache` or `lru_cache`: fine for a pure function of its arguments, not for one
  that reads the environment or holds live objects (each is listed with which it is).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "loopwright"

CONTAINERS = {
    "dict",
    "set",
    "list",
    "deque",
    "defaultdict",
    "OrderedDict",
    "Counter",
    "ChainMap",
    "bytearray",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "WeakSet",
}
MUTATORS = {
    "append",
    "appendleft",
    "extend",
    "extendleft",
    "insert",
    "pop",
    "popleft",
    "popitem",
    "remove",
    "discard",
    "clear",
    "update",
    "add",
    "setdefault",
    "sort",
    "reverse",
    "rotate",
    "difference_update",
    "intersection_update",
    "symmetric_difference_update",
    "move_to_end",
}

ALLOWED = {
    # -- built once at import: a registry of constants, not state ------------------------------
    "state/_values.py: _MAKERS mutated": "each frozen class's maker, compiled with its `__init__` "
    "the first time the class is used (`_first_init`, issue 32: not at import): a cache of code, "
    "the same whichever run fills it, holding nothing of a run",
    "state/_values.py: _LATER mutated": "the frozen classes not compiled yet (`_first_init`): "
    "each leaves it once, when it is first used",
    # -- process-wide by contract (documented), read or written by configuration, not by runs --
    "models/__init__.py: _PROVIDERS mutated": "the provider registry: `register_provider` (public, "
    "docs/providers.md) and the installed plugins' entry points; configuration of the process",
    "models/__init__.py: _RESOLVED mutated": "one model (its HTTP client and connections) per "
    "`provider:model` string per process, shared by every run as documented (`get_model`); a "
    "candidate for a runtime's own, but its clients hold no session's state",
    "redact.py: _secrets mutated": "the values redacted in this process (`redact.register`): "
    "logs and every door are process-wide, so what they must never show is too",
    "redact.py: global _exact, _screens in register": "the patterns compiled from `_secrets`, "
    "replaced whole under its lock (readers take the pair as it stands)",
    "redact.py: global _exact, _screens in forget": "as in `register`",
    "telemetry/__init__.py: global _tracing in enable": "the process's tracing switch "
    "(docs/telemetry.md: LOOPWRIGHT_OTEL, [telemetry], enable()); read only by "
    "`telemetry.observers()`, as a Session or Runtime is made, never by a run",
    "telemetry/__init__.py: global _tracing in disable": "as in `enable`",
    # -- process resources ------------------------------------------------------------------
    "loop/threads.py: global _last in _inbox": "the running event loop's inbox, kept at hand (one "
    "loop runs at a time in most processes); found again when the running loop is another",
    "loop/threads.py: global _pool, _last in _forked": "the worker threads are the process's (like "
    "`concurrent.futures`' default executor); a forked child starts with none",
    "builtins/groups.py: _STOPPING mutated": "strong references to stops that outlive their call "
    "(asyncio keeps only weak ones to tasks), each dropped as it ends",
    "plugins.py: global _loaded in plugins": "the installed plugins (entry points), loaded once "
    "per process: the installation does not change under it",
    "acp/__init__.py: sets sys.stdout in _protocol_stdout": "the editor adapter speaks its "
    "protocol on the process's stdout: it keeps it for that alone (a tool's print goes to stderr)",
    # -- caches -------------------------------------------------------------------------------
    "models/catalog.py: cache _data": "pure: the package's catalog.json",
    "models/catalog.py: cache lookup": "pure: a function of the model name over catalog.json",
    "mcp/naming.py: cache _bounded": "pure: a validator class per JSON Schema draft class",
    "models/model_inputs.py: cache accepted": "pure: a function of the model name over a constant table",
    "runtime/commits.py: cache crash_points_of_process": "reads the environment, on purpose: the "
    "crash points a test injects (LOOPWRIGHT_CRASH_AT) count down once for the whole process",
    "server/settings.py: cache version": "pure: the installed package's version",
    "wire.py: cache _published_adapter": "pure: the schema's adapter over the event classes and "
    "the lifecycle notifications",
    "sandbox/bwrap.py: cache _forwarder": "the system python3 the allow-list's forwarder runs on, "
    "found once per process (a missing one raises, and is not cached)",
    "sandbox/bwrap.py: _checked mutated": "bubblewrap's probe, once per executable per process: "
    "whether it can start here does not change while the process runs (a failed probe is not "
    "kept, so a fix is seen at the next run)",
    "server/openapi_schemas.py: cache _components": "pure: the schemas of the body models and the "
    "events, generated once (never changed after)",
    "tools.py: cache _ask_user_tool": "a constant tool, built on first use (pydantic is imported "
    "only then)",
    "store/sql.py: cache _whole_second": "pure: a second's ISO text, kept for the commits within it",
    "wire.py: cache _adapter": "pure: a pydantic TypeAdapter per type",
    "wire.py: cache _serializer": "pure: a serializer per type",
    "wire.py: cache _event_adapter": "pure: the events' TypeAdapter",
    "wire.py: cache _v1_event_adapter": "pure: the v1 profile's TypeAdapter",
    "wire.py: cache _messages_adapter": "pure: the messages' TypeAdapter",
}


def _container(value: ast.expr) -> bool:
    if isinstance(value, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.List, ast.ListComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return name in CONTAINERS
    return False


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        else:
            flat.append(target)
    return flat


def findings(tree: ast.Module, module: str) -> set[str]:
    """What `tree` holds of the kinds the module docstring names, one line each."""
    containers = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
        for target in _targets(node)
        if isinstance(target, ast.Name) and _container(node.value)
    }
    modules = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
        if isinstance(node, ast.Import) or node.module is None or node.level
    }
    found: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in function.decorator_list:
            text = ast.unparse(decorator)
            if text.split("(")[0].split(".")[-1] in {"cache", "lru_cache"}:
                found.add(f"{module}: cache {function.name}")
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found.add(f"{module}: global {', '.join(node.names)} in {function.name}")
            call = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(call, ast.Attribute)
                and call.attr in MUTATORS
                and isinstance(call.value, ast.Name)
                and call.value.id in containers
            ):
                found.add(f"{module}: {call.value.id} mutated")
            for target in _targets(node):
                base = target.value if isinstance(target, (ast.Subscript, ast.Attribute)) else None
                name = base.id if isinstance(base, ast.Name) else None
                if isinstance(target, ast.Subscript) and name in containers:
                    found.add(f"{module}: {name} mutated")
                if isinstance(target, ast.Attribute) and name in modules:
                    found.add(f"{module}: sets {name}.{target.attr} in {function.name}")
    return found


def package_findings() -> set[str]:
    return {
        line
        for path in sorted(SRC.rglob("*.py"))
        for line in findings(ast.parse(path.read_text()), path.relative_to(SRC).as_posix())
    }


def test_no_module_level_mutable_state_but_the_allowed():
    found = package_findings()
    assert sorted(found - ALLOWED.keys()) == [], "module-level state: own it, or allow it here"
    assert sorted(ALLOWED.keys() - found) == [], "allowed, no longer found: drop the entry"


def test_each_kind_is_found():
    source = """
import functools
from . import driver
_seen: dict[int, object] = {}
_queue = deque()
_count = 0
KINDS = {"a": 1}

def remember(key, value):
    _seen[key] = value
    _queue.append(value)
    global _count
    _count += 1
    driver.OBSERVE = value
    return KINDS["a"]

@functools.lru_cache(maxsize=None)
def made(name):
    return name
"""
    assert findings(ast.parse(source), "m.py") == {
        "m.py: _seen mutated",
        "m.py: _queue mutated",
        "m.py: global _count in remember",
        "m.py: sets driver.OBSERVE in remember",
        "m.py: cache made",
    }
