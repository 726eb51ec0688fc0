"""Importing a project's own Python files (`agent.py`, `tools.py`) as modules: an error in one
raises a `ConfigError` naming the file and line."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from ..errors import ConfigError


def import_file(path: Path, name: str) -> ModuleType:
    """Import a project file as a module; an error names the file and line."""
    module_name = f"loopwright_project.{name.replace('-', '_')}"
    loaded = importlib.util.spec_from_file_location(module_name, path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    sys.modules[module_name] = module
    try:
        loaded.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        line = f":{frames[-1].lineno}" if frames else ""
        if isinstance(exc, SyntaxError) and exc.lineno:
            line = f":{exc.lineno}"
        raise ConfigError(f"{type(exc).__name__}: {exc}", source=f"{path}{line}") from None
    return module
