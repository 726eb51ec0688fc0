"""Keys asked for per request: a command or a callable gives the key, asked again when the
provider answers 401 or the key's stated expiry passes (`providers`, `_client`).

A `KeySource` keeps the key it was last given and when it expires: `get` returns it while it
is good, else asks for a fresh one; `renew(stale)` (after a 401) asks again unless another request
already did. Requests that find the key stale together share one asking (no stampede): the first
starts it as a task, the others await the same task. Every key given is registered with
`loopwright.redact` before it is used (P11); no error or log line here holds it.

The getter is a callable — sync (run in a thread, so a token fetch does not stop the event loop)
or async — returning the key or `(key, expires_at)`, expires_at in seconds since the epoch (or an
aware `datetime`); or a command (`api_key_command`), run without a shell (its words split by
`shlex`), whose trimmed stdout is the key, valid for `ttl` seconds if one is set.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import shlex
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeAlias

from .. import redact
from ..errors import ConfigError

KeyGetter: TypeAlias = Callable[[], Any]
"""A callable (sync or async) returning a key, or `(key, expires_at)`."""

COMMAND_TIMEOUT = 30.0
"""Seconds a key command may take when its endpoint does not say."""

log = logging.getLogger("loopwright.providers")


class KeyUnavailable(Exception):
    """No key could be had: the command failed, timed out or printed nothing, or the callable
    raised or returned no key. Its text never holds a key; the request ends as a `ModelFailure`
    (`_errors.failure_from`)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class KeySource:
    """The key of an endpoint (or of one model), as its getter gives it; shared by every
    request made with it."""

    def __init__(
        self,
        getter: KeyGetter,
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.time,
        name: str = "api_key",
    ) -> None:
        self.getter = getter
        self.ttl = ttl
        """Seconds a key lives when the getter states no expiry (None: until a 401)."""
        self.clock = clock
        """Seconds since the epoch; a test injects its own."""
        self.name = name
        """How errors and logs name the source (the command as written, or the callable)."""
        self._key: str | None = None
        self._expires: float | None = None
        self._asking: asyncio.Task[str] | None = None

    @classmethod
    def command(
        cls, command: str, *, ttl: float | None = None, timeout: float | None = None
    ) -> KeySource:
        """A source running `command` (without a shell) for each key."""
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(f"api_key_command: {exc}") from None
        if not argv:
            raise ConfigError("api_key_command is empty")
        limit = timeout or COMMAND_TIMEOUT
        return cls(lambda: run_command(argv, limit), ttl=ttl, name=f"key command {argv[0]!r}")

    async def get(self) -> str:
        """The key to send now: the one held while it is good, else a fresh one."""
        key, expires = self._key, self._expires
        if key is not None and (expires is None or self.clock() < expires):
            return key
        return await self._ask()

    async def renew(self, stale: str) -> str:
        """A fresh key after `stale` was refused (401); the one held if another request has
        renewed it since."""
        if self._key is not None and self._key != stale:
            return await self.get()
        self._key = None
        return await self._ask()

    async def _ask(self) -> str:
        loop = asyncio.get_running_loop()
        task = self._asking
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._asking = loop.create_task(self._fetch())
            task.add_done_callback(_retrieved)
        return await asyncio.shield(task)  # (a waiter cancelled leaves the others theirs)

    async def _fetch(self) -> str:
        try:
            value = await asyncio.to_thread(self.getter)  # an async getter gives its coroutine
            if inspect.isawaitable(value):
                value = await value
        except KeyUnavailable as exc:
            log.warning("no API key: %s", exc)
            raise
        except Exception as exc:
            log.warning("no API key: %s raised %s", self.name, type(exc).__name__)
            raise KeyUnavailable(f"{self.name} raised {type(exc).__name__}") from None
        key, expires = value if isinstance(value, tuple) else (value, None)
        if not isinstance(key, str) or not key.strip():
            raise KeyUnavailable(f"{self.name} gave no key")
        key = key.strip()
        redact.register(key)  # before it is used anywhere (P11)
        if isinstance(expires, datetime):
            expires = expires.timestamp()
        elif expires is None and self.ttl:
            expires = self.clock() + self.ttl
        self._key, self._expires = key, None if expires is None else float(expires)
        log.info("new API key from %s", self.name)
        return key


def _retrieved(task: asyncio.Task[str]) -> None:
    """Mark a failure as seen: every waiter may have been cancelled before it came."""
    if not task.cancelled():
        task.exception()


async def run_command(argv: list[str], timeout: float) -> str:
    """The trimmed stdout of `argv`; `KeyUnavailable` when it cannot start, fails or times out
    (the error names the command and its exit code, with the last line of its stderr)."""
    what = f"key command {argv[0]!r}"
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise KeyUnavailable(f"{what} cannot start: {exc.strerror or exc}") from None
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise KeyUnavailable(f"{what} did not finish in {timeout:g} s", retryable=True) from None
    if process.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        said = f": {redact.head(redact.text(lines[-1]), 300)}" if lines else ""
        raise KeyUnavailable(f"{what} exited with code {process.returncode}{said}")
    key = out.decode(errors="replace").strip()
    if not key:
        raise KeyUnavailable(f"{what} printed no key")
    return key
