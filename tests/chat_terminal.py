"""A real terminal for `loopwright chat` tests: tmux on its own socket, a 100×30 pane running
the command, keys sent as a person types them, and the screen read back. Waiting is polling
the screen for a condition (a signal the program gives), with a generous deadline."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
DEADLINE = 60.0
"""Seconds a condition on the screen may take to appear (a slow, shared machine)."""

needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


class Pane:
    """One tmux pane (its own server, under `home`) running `command` in `cwd`."""

    def __init__(self, home: Path, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        assert TMUX is not None
        self.socket = str(home / "tmux.sock")
        self.log = home / "pane.log"
        line = " ".join(shlex.quote(word) for word in command)
        # the exit status is shown and the pane stays to be read; Ctrl-C reaches the command
        # alone (the shell runs a trap, which its child does not inherit)
        shell = f'trap true INT; {line}; echo "[exit $?]"; sleep 3600'
        self.tmux(
            "-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "30",
            "-c", str(cwd), "sh", "-c", shell, env=env,
        )  # fmt: skip
        self.tmux("set-option", "-g", "history-limit", "5000")

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-S", self.socket, *args],
            capture_output=True,
            text=True,
            env=env if env is not None else os.environ,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def type(self, text: str, *, enter: bool = True) -> None:
        """Type `text` literally (and Enter)."""
        self.tmux("send-keys", "-l", text)
        if enter:
            self.keys("Enter")

    def keys(self, *names: str) -> None:
        """Press keys by tmux's names: Enter, C-c, C-d, M-Enter, Up, ..."""
        self.tmux("send-keys", *names)

    def screen(self) -> str:
        """What the pane shows, with everything scrolled off it, lines (and the end) trimmed."""
        text = self.tmux("capture-pane", "-p", "-J", "-S", "-")
        return "\n".join(line.rstrip() for line in text.splitlines()).rstrip()

    def wait(self, check: str | Callable[[str], bool], *, after: int = 0) -> str:
        """The screen once `check` (a text, or a condition on the screen past its `after`th
        character) holds; fails with the screen at the deadline."""
        test = (lambda s: check in s) if isinstance(check, str) else check
        deadline = time.monotonic() + DEADLINE
        while True:
            shown = self.screen()
            if test(shown[after:]):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"not on the screen: {check!r}\n---\n{shown}")
            time.sleep(0.05)  # polling the screen for the condition, not waiting a time out

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-S", self.socket, "kill-server"], capture_output=True)
