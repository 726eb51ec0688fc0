"""An endpoint as data: a name, a wire dialect, a base URL and where its key is (`providers`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from .. import redact
from ..errors import ConfigError

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

    def window(self, model: str) -> int | None:
        """The context window config states for `model`, if any."""
        return self.windows.get(model) or self.context_window

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
