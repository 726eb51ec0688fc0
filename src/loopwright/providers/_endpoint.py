"""An endpoint as data: a name, a wire dialect, a base URL and where its key is (`providers`)."""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from typing import Literal

from .. import redact
from ..errors import ConfigError
from ._keys import KeyGetter, KeySource

Dialect = Literal["openai-chat", "openai-responses", "anthropic"]
Server = Literal["llamacpp", "ollama", "vllm"]
"""A local server that says its models' context windows (`_windows`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """Where a model is served and how to talk to it."""

    name: str
    dialect: Dialect
    base_url: str | None = None
    """None: the SDK's default, or its base-URL environment variable."""
    api_key_env: str | None = None
    """The environment variable holding the key; None when the server needs none."""
    timeout: float = 120.0
    """Seconds a request may take, and the longest silence inside a stream."""
    context_window: int | None = None
    """Every model's context window here, in tokens, when config states it (`windows` names
    one model's); else it is read from the `server`, else the catalog's."""
    windows: dict[str, int] = field(default_factory=dict, hash=False)
    """Model name → its context window, as config states it."""
    server: Server | None = None
    """The kind of server: its models' windows are read from it (llama.cpp `GET /props`,
    Ollama `POST /api/show`, vLLM `GET /v1/models`) unless config states them."""
    tool_calls_in_text: bool = False
    """Recover tool calls a model writes in its text (JSON, fenced JSON, `<tool_call>` tags)
    as calls: small open models often do (`_text_calls`)."""
    api_key_command: str | None = None
    """A command printing the key (run without a shell, per `_keys`); it wins over
    `api_key_env`, and runs again on a 401 or once `api_key_ttl` seconds have passed."""
    api_key_ttl: float | None = None
    """Seconds a key from the command lives (None: until the provider answers 401)."""
    api_key_timeout: float | None = None
    """Seconds the command may take (None: `_keys.COMMAND_TIMEOUT`)."""
    get_api_key: KeyGetter | None = field(default=None, compare=False, repr=False)
    """A callable, sync or async, giving the key or `(key, expires_at)`; it wins over the
    command and the variable."""
    keys: KeySource | None = field(default=None, init=False, compare=False, repr=False)
    """The source every model made here shares (from `get_api_key` or `api_key_command`)."""

    def __post_init__(self) -> None:
        keys = None
        if self.get_api_key is not None:
            keys = KeySource(self.get_api_key, ttl=self.api_key_ttl, name=f"{self.name} api_key")
        elif self.api_key_command:
            ttl, timeout = self.api_key_ttl, self.api_key_timeout
            keys = KeySource.command(self.api_key_command, ttl=ttl, timeout=timeout)
        object.__setattr__(self, "keys", keys)

    def window(self, model: str) -> int | None:
        """The context window config states for `model`, if any."""
        return self.windows.get(model) or self.context_window

    def key(self) -> str | KeySource:
        """The key (`api_key`), or the source asked for it per request; a command that is not
        installed fails now, naming it."""
        if self.keys is not None and self.get_api_key is None and self.api_key_command:
            program = shlex.split(self.api_key_command)[0]
            if shutil.which(program) is None:
                raise ConfigError(f"the key command of '{self.name}' is not found: {program}")
        return self.keys if self.keys is not None else self.api_key()

    def api_key(self) -> str:
        if self.api_key_env is None:
            return "not-needed"
        key = os.environ.get(self.api_key_env)
        redact.register(key)  # never in what leaves the process or is stored (P11)
        if not key:
            raise ConfigError(
                f"missing API key for '{self.name}': set the environment variable "
                f"{self.api_key_env} (or put it in the project's .env)"
            )
        return key
