"""tests/reaper.py: a server of a session of its own dies with the tests' process, and only then."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from reaper import Reaper

SAFETY = 60  # seconds: a bound that only a broken watchdog reaches

SERVER = """
import signal, subprocess, sys
helper = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
print(helper.pid, flush=True)  # a process of the server's group
signal.pause()
"""

TESTS = """
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from reaper import Reaper
server = subprocess.Popen([sys.executable, "-c", sys.argv[2]], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, text=True, start_new_session=True)
helper = server.stdout.readline().strip()
Reaper(server)
print(server.pid, helper, flush=True)
sys.stdin.read()  # the test's word
os._exit(0)  # gone, as a killed test process: nothing stopped, nothing said
"""


def ended(pid_fd: int) -> bool:
    """Whether the process ends within SAFETY seconds (its pidfd becomes readable)."""
    ready, _, _ = select.select([pid_fd], [], [], SAFETY)
    return ready == [pid_fd]


def test_a_server_in_a_session_of_its_own_dies_with_the_tests_process():
    tests = subprocess.Popen(
        [sys.executable, "-c", TESTS, str(Path(__file__).parent), SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert tests.stdin is not None and tests.stdout is not None
    pids = [int(pid) for pid in tests.stdout.readline().split()]
    fds = [os.pidfd_open(pid) for pid in pids]  # the server and its helper
    try:
        tests.stdin.close()
        assert tests.wait(timeout=SAFETY) == 0
        assert [ended(fd) for fd in fds] == [True, True]
    finally:
        tests.stdout.close()
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pids[0], signal.SIGKILL)  # (only if the watchdog failed)


def test_a_server_stopped_by_its_test_is_left_alone():
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert server.stdout is not None
    server.stdout.readline()  # its helper runs
    reaper = Reaper(server)
    try:
        reaper.stop()  # (as a test says once it stopped the server: here it still runs)
        assert reaper.watchdog.returncode == 0
        assert server.poll() is None
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        server.stdout.close()
