"""What starting loopwright loads (issue 32 goal 5: `import loopwright` and `loopwright --version`
cheap, measured in instructions by bench/imports.py): pinned here by the modules a fresh process
holds afterwards, never by time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import loopwright

HEAVY = [
    *("asyncio", "yaml", "pydantic", "httpx", "starlette", "uvicorn", "jsonschema", "dotenv"),
    *("sqlite3", "importlib.metadata"),
    *("loopwright.agent", "loopwright.events", "loopwright.loop.session", "loopwright.runtime"),
    *("loopwright.server", "loopwright.store.log", "loopwright.store.sqlite_log"),
    *("loopwright.store.pg_log", "loopwright.providers", "loopwright.notify", "loopwright.wire"),
    *("loopwright.project", "loopwright.cli.runner", "loopwright.cli.render"),
]
"""What neither an import of the package nor the command line's start needs."""

CLI = "import sys; from loopwright.cli.main import main; sys.exit(main())"


def loaded(code: str, *argv: str) -> tuple[list[str], str]:
    """The modules of HEAVY a fresh process has loaded when `code` is done, and its stdout."""
    report = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]),"
        " file=sys.stderr))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPWRIGHT_OTEL",)}
    out = subprocess.run(
        [sys.executable, "-c", report + code, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return json.loads(out.stderr.strip().splitlines()[-1]), out.stdout


def test_import_loopwright_loads_no_runtime() -> None:
    assert loaded("import loopwright") == ([], "")


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_command_line_starts_without_the_runtime(flag: str) -> None:
    found, stdout = loaded(CLI, flag)
    assert found == (["importlib.metadata"] if flag == "--version" else [])  # (the version)
    assert stdout.startswith("loopwright " if flag == "--version" else "usage: loopwright ")


def test_a_public_name_loads_its_module_and_no_server_store_or_provider() -> None:
    """`from loopwright import Agent` loads the runtime's core, as before, and still none of
    the doors, the store's backends, the providers or the wire's pydantic models."""
    found, _ = loaded("from loopwright import Agent, Session, tool, Event")
    assert "loopwright.agent" in found and "loopwright.events" in found and "asyncio" in found
    rest = [m for m in found if m.startswith(("loopwright.server", "loopwright.store"))]
    outer = {"pydantic", "httpx", "starlette", "uvicorn", "yaml", "sqlite3"}
    assert rest == [] and outer.isdisjoint(found) and "loopwright.providers" not in found


def test_lazy_names_are_the_modules_names() -> None:
    from loopwright import agent, events, loop, store

    assert loopwright.Agent is agent.Agent and loopwright.Event is events.Event
    assert loopwright.events is events and loopwright.loop is loop
    assert loopwright.Session is loop.session.Session
    assert store.StoreError is store.records.StoreError and store.open_log is store.opening.open_log
    assert set(loopwright.__all__) <= set(dir(loopwright))
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        loopwright.nothing_here  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute '_private'"):
        loopwright._private  # noqa: B018
