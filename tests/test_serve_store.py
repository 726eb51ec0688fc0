"""The PostgreSQL store as the server and the CLI name it: `loopwright serve` opens it before
it serves (a database it cannot reach is an error at once, not at the first request, and the
app's startup fails the same way under any ASGI server), and `loopwright sessions` with no
sessions says which database it looked in — never with the URL's password."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.store import StoreError
from pg_cluster import free_port
from scale_cluster import SAFETY, make_project
from test_cli import LOOPWRIGHT
from test_cli_serve import ENV

pytest.importorskip("psycopg")


def unreachable() -> tuple[str, str]:
    """A URL with a password, of a port nobody listens on, and how messages show it."""
    port = free_port()
    return (
        f"postgresql://ops:s3cret@127.0.0.1:{port}/shop",
        f"postgresql://ops@127.0.0.1:{port}/shop",
    )


def test_serve_fails_at_once_on_a_database_it_cannot_reach(tmp_path: Path) -> None:
    url, shown = unreachable()
    root = make_project(tmp_path / "project")
    done = subprocess.run(
        [LOOPWRIGHT, "serve", "--project", str(root), "--port", "0"],
        env=ENV | {"LOOPWRIGHT_STORE_URL": url},
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert done.returncode == 2, done.stderr
    first, hint = done.stderr.splitlines()[:2]
    assert first.startswith(f"loopwright: error: {shown}: cannot open the event log: "), first
    assert "check [store] in loopwright.toml (or $LOOPWRIGHT_STORE_URL)" in hint
    assert "s3cret" not in done.stderr
    assert "serving" not in done.stderr  # it never said it serves


def test_the_apps_startup_opens_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    url, shown = unreachable()
    monkeypatch.setenv("LOOPWRIGHT_STORE_URL", url)
    app = create_app(load_project(make_project(tmp_path / "project")))
    with pytest.raises(StoreError) as failed, TestClient(app):
        pass  # (never reached: the startup fails)
    assert str(failed.value).startswith(f"{shown}: cannot open the event log: ")


def test_sessions_names_the_database_it_looked_in(tmp_path: Path, pg_url: str) -> None:
    with_password = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@", 1)
    assert with_password != pg_url
    root = make_project(tmp_path / "project")
    done = subprocess.run(
        [LOOPWRIGHT, "sessions", "--project", str(root)],
        env=ENV | {"LOOPWRIGHT_STORE_URL": with_password},
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert done.returncode == 0, done.stderr
    where = pg_url.split("?")[0]  # postgresql://postgres@127.0.0.1:PORT/postgres
    assert done.stderr == f"no sessions yet (store: {where})\n"
