"""Real model providers behind the one `Model` protocol, and endpoints as data.

Three wire dialects cover the field: `openai-chat` (Chat Completions: OpenAI and every
OpenAI-compatible server), `openai-responses` (the Responses API) and `anthropic` (Messages).
An endpoint is data — a name, a dialect, a base URL and the environment variable holding its
key — so DeepSeek, Ollama, vLLM, a llama.cpp server, OpenRouter, Kimi, GLM or Gemini's compatible
endpoint are presets, and users add their own in `loopwright.toml`:

    [providers.mylab]
    base_url = "http://10.0.0.5:8000/v1"
    api_key_env = "MYLAB_KEY"      # optional for local servers
    # api_key_command = "gcloud auth print-access-token"   # or a key per request (`_keys`)
    # api_key_ttl = 3000           # seconds a command's key lives (else until a 401)
    dialect = "openai-chat"
    server = "llamacpp"            # read each model's context window from it (or ollama, vllm)
    tool_calls_in_text = true      # recover calls the model writes as text
    context_window = 8192          # every model's window here (else the server's, the catalog's)
    [providers.mylab.models.qwen3]
    context_window = 32768         # one model's

A table named like a preset (`[providers.llamacpp]`) starts from the preset's values.

Model strings are `endpoint:model` (`anthropic:claude-sonnet-4-5`, `ollama:qwen3`). Vendor SDK
types never leave the dialect modules. A missing key fails before any request, naming the
variable; the SDKs' standard base-URL variables (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`) apply
to the `openai`/`anthropic` endpoints when no base URL is configured.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..models import Model, ModelFactory, register_provider
from ._endpoint import Dialect as Dialect
from ._endpoint import Endpoint
from ._keys import KeySource

PRESETS: dict[str, Endpoint] = {
    e.name: e
    for e in (
        Endpoint(name="openai", dialect="openai-chat", api_key_env="OPENAI_API_KEY"),
        Endpoint(name="openai-responses", dialect="openai-responses", api_key_env="OPENAI_API_KEY"),
        Endpoint(name="anthropic", dialect="anthropic", api_key_env="ANTHROPIC_API_KEY"),
        Endpoint(
            name="deepseek",
            dialect="openai-chat",
            base_url="https://api.deepseek.com/v1",
            api_key_env="DEEPSEEK_API_KEY",
        ),
        Endpoint(
            name="openrouter",
            dialect="openai-chat",
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
        ),
        Endpoint(
            name="kimi",
            dialect="openai-chat",
            base_url="https://api.moonshot.ai/v1",
            api_key_env="MOONSHOT_API_KEY",
        ),
        Endpoint(
            name="glm",
            dialect="openai-chat",
            base_url="https://open.bigmodel.cn/api/paas/v4",
            api_key_env="GLM_API_KEY",
        ),
        Endpoint(
            name="gemini",
            dialect="openai-chat",
            base_url="https://generativelanguage.googleapis.com/v1beta/openai",
            api_key_env="GEMINI_API_KEY",
        ),
        Endpoint(
            name="ollama",
            dialect="openai-chat",
            base_url="http://localhost:11434/v1",
            server="ollama",
            tool_calls_in_text=True,
        ),
        Endpoint(
            name="vllm", dialect="openai-chat", base_url="http://localhost:8000/v1", server="vllm"
        ),
        Endpoint(
            name="llamacpp",
            dialect="openai-chat",
            base_url="http://localhost:8080/v1",
            server="llamacpp",
            tool_calls_in_text=True,
        ),
    )
}


def make_model(endpoint: Endpoint, model: str, **options: Any) -> Model:
    """A `Model` for `model` at `endpoint` (the key is checked now, before any request)."""
    if not model:
        raise ConfigError(f"'{endpoint.name}:' needs a model name, e.g. '{endpoint.name}:NAME'")
    key = options.pop("api_key", None) or endpoint.key()  # first: no SDK imported to fail
    if callable(key):
        key = KeySource(key, name=f"{endpoint.name} api_key")
    _require_sdk(endpoint)
    if endpoint.dialect == "openai-chat":
        from .openai_chat import OpenAIChatModel

        return OpenAIChatModel(endpoint, model, api_key=key, **options)
    if endpoint.dialect == "openai-responses":
        from .openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(endpoint, model, api_key=key, **options)
    from .anthropic import AnthropicModel

    return AnthropicModel(endpoint, model, api_key=key, **options)


def _require_sdk(endpoint: Endpoint) -> None:
    """Fail with one sentence naming the extra to install when the dialect's SDK is missing."""
    sdk = "anthropic" if endpoint.dialect == "anthropic" else "openai"
    for module in (sdk, "jiter"):
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(
                f'the {endpoint.name} provider needs the {sdk} SDK: pip install "loopwright[{sdk}]"'
            ) from None


def register_endpoint(endpoint: Endpoint) -> None:
    """Make `"<endpoint.name>:<model>"` strings resolve to this endpoint."""
    register_provider(endpoint.name, _factory(endpoint))


def _factory(endpoint: Endpoint) -> ModelFactory:
    return lambda model: make_model(endpoint, model)


def load_endpoints(path: str | Path) -> list[Endpoint]:
    """Register the `[providers.NAME]` tables of a `loopwright.toml`."""
    import tomllib

    source = Path(path)
    try:
        data = tomllib.loads(source.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read providers: {exc}", source=str(source)) from None
    endpoints = []
    for name, table in (data.get("providers") or {}).items():
        endpoint = _endpoint(name, table, f"{source} [providers.{name}]")
        register_endpoint(endpoint)
        endpoints.append(endpoint)
    return endpoints


KEYS = {"base_url", "api_key_env", "dialect", "timeout", "context_window", "server"}
KEYS |= {"tool_calls_in_text", "models", "api_key_command", "api_key_ttl", "api_key_timeout"}


def _endpoint(name: str, table: Any, where: str) -> Endpoint:
    """One `[providers.NAME]` table, over the preset of that name if there is one."""
    if not isinstance(table, dict):
        raise ConfigError("expected a table", source=where)
    unknown = set(table) - KEYS
    if unknown:
        raise ConfigError(f"unknown keys {sorted(unknown)}", source=where)
    preset = PRESETS.get(name)
    dialect = table.get("dialect", preset.dialect if preset else "openai-chat")
    if dialect not in ("openai-chat", "openai-responses", "anthropic"):
        raise ConfigError(
            f"unknown dialect {dialect!r} (openai-chat, openai-responses, anthropic)",
            source=where,
        )
    if table.get("server") not in (None, "llamacpp", "ollama", "vllm"):
        raise ConfigError(
            f"unknown server {table['server']!r} (llamacpp, ollama, vllm)", source=where
        )
    windows: dict[str, int] = {}
    for model, settings in (table.get("models") or {}).items():
        if not isinstance(settings, dict) or set(settings) != {"context_window"}:
            raise ConfigError(f"models.{model}: expected context_window = TOKENS", source=where)
        windows[model] = _window(settings["context_window"], f"models.{model}", where) or 0
    preset = preset or Endpoint(name=name, dialect=dialect)
    try:
        return _over(preset, table, dialect, windows, where)
    except ConfigError as exc:  # (a key command that does not split into words)
        raise exc if exc.source else ConfigError(str(exc), source=where) from None


def _over(preset: Endpoint, table: Any, dialect: Any, windows: Any, where: str) -> Endpoint:
    return replace(
        preset,
        dialect=dialect,
        base_url=table.get("base_url", preset.base_url),
        api_key_env=table.get("api_key_env", preset.api_key_env),
        timeout=float(table.get("timeout", preset.timeout)),
        context_window=_window(table.get("context_window"), "context_window", where),
        windows=windows,
        server=table.get("server", preset.server),
        tool_calls_in_text=bool(table.get("tool_calls_in_text", preset.tool_calls_in_text)),
        api_key_command=table.get("api_key_command") or None,
        api_key_ttl=_seconds(table.get("api_key_ttl"), "api_key_ttl", where),
        api_key_timeout=_seconds(table.get("api_key_timeout"), "api_key_timeout", where),
    )


def _seconds(value: Any, key: str, where: str) -> float | None:
    if value is not None and (type(value) not in (int, float) or value <= 0):
        raise ConfigError(
            f"{key} must be a positive number of seconds, not {value!r}", source=where
        )
    return None if value is None else float(value)


def _window(value: Any, key: str, where: str) -> int | None:
    if value is not None and (type(value) is not int or value <= 0):
        raise ConfigError(f"{key} must be a positive number of tokens, not {value!r}", source=where)
    return value


def presets() -> dict[str, ModelFactory]:
    """The built-in endpoints' factories (`registry.get_model` registers them on first use)."""
    return {name: _factory(endpoint) for name, endpoint in PRESETS.items()}
