"""The public surface: a small explicit export list, an import without side effects, and the
size budget that keeps modules readable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import loopwright

SRC = Path(loopwright.__file__).parent


def test_public_exports():
    assert loopwright.__all__ == sorted(loopwright.__all__, key=lambda n: (not n.isupper(), n))
    assert set(loopwright.__all__) == {
        "DEFER",
        "Agent",
        "Answer",
        "Approval",
        "ApprovalRequest",
        "AssistantMessage",
        "Block",
        "ConfigError",
        "Event",
        "History",
        "Hooks",
        "LoopwrightError",
        "Message",
        "Model",
        "NeedsAnswer",
        "RetryPolicy",
        "Rules",
        "Run",
        "RunResult",
        "Session",
        "SessionBusy",
        "Stop",
        "Tool",
        "ToolCall",
        "ToolContext",
        "ToolError",
        "ToolResultMessage",
        "ToolReturn",
        "ToolList",
        "Toolset",
        "UnknownModel",
        "UserMessage",
        "get_model",
        "run",
        "run_sync",
        "tool",
    }
    for name in loopwright.__all__:
        assert getattr(loopwright, name) is not None


def test_import_has_no_side_effects(tmp_path):
    before = set(os.listdir(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", "import loopwright, loopwright.testing, loopwright.wire"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
        check=True,
    )
    assert (out.stdout, out.stderr) == ("", "")
    assert set(os.listdir(tmp_path)) == before


def test_core_imports_nothing_from_outer_layers():
    core = [
        "loop/loop",
        "loop/steps",
        "gate/decide",
        "gate/batch",
        "loop/retry",
        "state/compaction",
        "events",
        "messages",
        "tools",
        "gate/permissions",
        "approvals",
        "hooks",
        "agent",
        "loop/session",
        "loop/budget",
        "wire",
        "errors",
    ]
    import ast

    for name in core:
        tree = ast.parse((SRC / f"{name}.py").read_text())
        imported = {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        }
        imported |= {
            a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
        }
        for module in imported:
            parts = module.split(".")
            assert not {"cli", "server", "store"} & set(parts), (name, module)


def test_the_server_and_the_cli_are_separate_layers():
    """Each interface stands on the library alone: the server imports nothing from the CLI
    (it only starts the server)."""
    import ast

    for path in (SRC / "server").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not [m for m in imported if "cli" in m.split(".")], path.name


ALLOWED = {
    # the flat catalogue of event values (one small class per wire type), not logic; 650 since
    # issue 35 added its additive types (reply transforms, notes, tool labels and details)
    "events.py": 650,
    # the loop must read on a few screens (STYLE: 150-250 lines); its steps are loop/steps.py
    "loop/loop.py": 250,
}
"""Modules whose size is not the cap of 400 lines (issue 30), each with its reason."""


def test_module_size_budget():
    sizes = {
        p.relative_to(SRC).as_posix(): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")
    }
    too_big = {name: n for name, n in sizes.items() if n > ALLOWED.get(name, 400)}
    assert not too_big, f"split these modules: {too_big}"
    core = sum(
        sizes[f"{n}.py"]
        for n in (
            "loop/loop",
            "loop/steps",
            "loop/batch_steps",
            "events",
            "messages",
            "tools",
            "gate/permissions",
            "approvals",
            "hooks",
            "loop/budget",
        )
    )
    # STYLE aims at ~1,500; 2,600 since issue 35 put custom messages, tool labels and argument
    # preparation, and three hook points into the core (see the closing notes)
    assert core <= 2600, core
