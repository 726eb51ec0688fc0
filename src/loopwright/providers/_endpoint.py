"""An endpoint as data: a name, a wire dialect, a base URL and where its key is (`providers`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from .. import redact
from ..errors import ConfigError

Dialect = Literal["openai-chat", "openai-responses", "anthropic"]


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
