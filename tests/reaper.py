"""Servers the tests start in a session of their own stop with the tests' process.

A server started with `start_new_session=True` (node's wrapper and the real node; `loopwright
serve` with its workers) survives a kill of the tests' process, and of its process group too.
`Reaper(process)` starts a watchdog, itself in a session of its own, that waits for the end of a
pipe only the tests' process holds: when that process dies first (killed, or a lost xdist
worker), the watchdog kills the server's whole group. `stop()`, called once the test stopped
the server itself, tells it so: it exits without killing anything (the group's id may have gone
to another process since).
"""

from __future__ import annotations

import subprocess
import sys

WATCHDOG = """
import os, signal, sys
if not sys.stdin.buffer.read():  # the end of the pipe, with nothing said: the tests died
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except ProcessLookupError:
        pass
"""


class Reaper:
    """Kills the process group led by `process` if the tests' process dies first."""

    def __init__(self, process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", WATCHDOG, str(process.pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def stop(self) -> None:
        """The server was stopped: the watchdog leaves without a kill."""
        stdin = self.watchdog.stdin
        assert stdin is not None
        if not stdin.closed:
            stdin.write(b"stopped")
            stdin.close()
        self.watchdog.wait()
