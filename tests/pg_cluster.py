"""A private PostgreSQL server for the tests, and a fresh schema of it per test.

`postgres_url` (a session fixture; each pytest-xdist worker starts its own) runs `initdb` in a
temporary directory — as user `postgres` when the tests run as root (the directory is theirs),
as the current user otherwise — and starts the server on a free loopback port, its unix socket in
that directory; at the end it stops it (`pg_ctl stop -m fast`) and removes the directory. A
watchdog process does the same if the tests' process dies first (killed, or a worker lost): it
waits for the end of a pipe only that process holds. The binaries are looked for under
/usr/lib/postgresql/*/bin (Debian's), then on PATH.
`LOOPWRIGHT_TEST_POSTGRES_URL` names a server to use instead.

When no server can be started (no binaries, no psycopg), the PostgreSQL tests are skipped with
the reason — unless `LOOPWRIGHT_REQUIRE_POSTGRES=1` (scripts/test sets it once it installed the
server) or `CI` is set: then it is a test error.

`pg_url` gives a test a schema of its own (created, then dropped with everything in it): the
server's URL with that schema as its `search_path`, where a log creates its tables.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

START_TIMEOUT = 60  # seconds pg_ctl waits for the server to accept connections


WATCHDOG = """
import shutil, subprocess, sys
sys.stdin.buffer.read()  # returns once the tests' process has closed its end, or has died
subprocess.run(sys.argv[1:-1], capture_output=True)  # pg_ctl stop (nothing if it was stopped)
shutil.rmtree(sys.argv[-1], ignore_errors=True)
"""
"""Run by a process of its own session (a kill of the tests' process group spares it)."""


class Unavailable(Exception):
    """No server can be started here (the reason says why)."""


def required() -> bool:
    """Whether a server that cannot be started fails the tests instead of skipping them."""
    flag = os.environ.get("LOOPWRIGHT_REQUIRE_POSTGRES", "")
    ci = os.environ.get("CI", "")
    return flag not in ("", "0") or ci.lower() not in ("", "0", "false")


def bindir() -> Path:
    """Where initdb, pg_ctl and postgres are: the newest Debian version, else PATH."""

    def version(initdb: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", initdb.parent.parent.name))

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=version)
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    if on_path is None:
        raise Unavailable(
            "PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/initdb "
            "nor initdb on PATH; on Debian: apt-get install postgresql)"
        )
    return Path(on_path).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Cluster:
    """One private server (see the module docstring)."""

    def __init__(self) -> None:
        self.bin = bindir()
        self.as_user: list[str] = []
        self.root = Path(tempfile.mkdtemp(prefix="loopwright-pg-"))
        if os.geteuid() == 0:  # the server refuses to run as root: it runs as postgres
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.root)
                raise Unavailable("running as root and there is no user postgres") from None
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            runuser = shutil.which("runuser") or "/usr/sbin/runuser"
            self.as_user = [runuser, "-u", "postgres", "--"]
        self.data = self.root / "data"
        self.url = ""
        self.options = ""
        self.watchdog: subprocess.Popen[bytes] | None = None

    def _run(self, tool: str, *args: str) -> None:
        command = [*self.as_user, str(self.bin / tool), *args]
        try:
            done = subprocess.run(command, capture_output=True, text=True, cwd=self.root)
        except OSError as exc:
            raise Unavailable(f"cannot run {command[0]}: {exc}") from None
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise Unavailable(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> str:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")  # fmt: skip
        for attempt in range(3):  # another process may take the free port first
            port = free_port()
            options = f"-h 127.0.0.1 -p {port} -k {self.root} -c shared_buffers=16MB"
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                          "-w", "-t", str(START_TIMEOUT), "-o", options, "start")  # fmt: skip
            except Unavailable:
                if attempt == 2:
                    raise
                continue
            self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            self.options = options
            stop = [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                    "-w", "stop"]  # fmt: skip
            self.watchdog = subprocess.Popen(
                [sys.executable, "-c", WATCHDOG, *stop, str(self.root)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            return self.url
        raise AssertionError("unreachable")

    def halt(self) -> None:
        """Stop the server (an outage: `pg_ctl stop -m fast`, which waits until it is down)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """Start the halted server again, on the same port (waits until it accepts)."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-w", "-t", str(START_TIMEOUT), "-o", self.options, "start")  # fmt: skip

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            if self.watchdog is not None:  # (it finds nothing left to do)
                assert self.watchdog.stdin is not None
                self.watchdog.stdin.close()
                self.watchdog.wait()


def unavailable(reason: str) -> None:
    """Skip, or fail where a server is required."""
    if required():
        pytest.fail(f"PostgreSQL is required here but cannot be started: {reason}")
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A server's URL, for the whole session (see the module docstring)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'loopwright[postgres]')")
    given = os.environ.get("LOOPWRIGHT_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    try:
        cluster = Cluster()
    except Unavailable as exc:
        unavailable(str(exc))
    try:
        yield cluster.start()
    except Unavailable as exc:
        unavailable(str(exc))
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[str]:
    """A schema of this test's own on the server: the server's URL, using it."""
    import psycopg
    from psycopg import sql

    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    joint = "&" if "?" in postgres_url else "?"
    yield f"{postgres_url}{joint}options={quote(f'-c search_path={schema}')}"
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
