"""Endpoints as data, the model catalog, and failure classification (no network)."""

from __future__ import annotations

import pytest

from loopwright import ConfigError, get_model
from loopwright.messages import Usage
from loopwright.models.catalog import lookup, with_cost
from loopwright.providers import PRESETS, Endpoint, load_endpoints
from loopwright.providers._errors import failure_from


def test_presets_cover_the_common_endpoints():
    assert {
        "openai",
        "openai-responses",
        "anthropic",
        "deepseek",
        "openrouter",
        "kimi",
        "glm",
        "gemini",
        "ollama",
        "vllm",
        "llamacpp",
    } <= set(PRESETS)
    assert PRESETS["ollama"].api_key_env is None  # local servers need no key
    assert PRESETS["deepseek"] == Endpoint(
        name="deepseek",
        dialect="openai-chat",
        base_url="https://api.deepseek.com/v1",
        api_key_env="DEEPSEEK_API_KEY",
    )


def test_user_endpoints_come_from_loopwright_toml(tmp_path, monkeypatch):
    config = tmp_path / "loopwright.toml"
    config.write_text(
        '[providers.mylab]\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "MYLAB_KEY"\ndialect = "openai-chat"\n'
    )
    [endpoint] = load_endpoints(config)
    assert endpoint == Endpoint(
        name="mylab",
        dialect="openai-chat",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="MYLAB_KEY",
    )
    monkeypatch.delenv("MYLAB_KEY", raising=False)
    with pytest.raises(ConfigError, match="set the environment variable MYLAB_KEY"):
        get_model("mylab:some-model")
    monkeypatch.setenv("MYLAB_KEY", "k")
    assert get_model("mylab:some-model").name == "mylab:some-model"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[providers.x]\ndialect = "grpc"\n', "unknown dialect 'grpc'"),
        ('[providers.x]\nbase = "http://h"\n', "unknown keys ['base']"),
        ("[providers\n", "cannot read providers"),
    ],
)
def test_bad_provider_tables_are_clear_errors(tmp_path, content, message):
    config = tmp_path / "loopwright.toml"
    config.write_text(content)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_endpoints(config)


def test_a_model_name_is_required():
    with pytest.raises(ConfigError, match="needs a model name"):
        get_model("ollama:")


def test_the_catalog_prices_usage_and_knows_windows():
    assert lookup("claude-sonnet-4-5-20250929") == lookup("claude-sonnet-4-5")
    assert lookup("openai/gpt-5-mini") == lookup("gpt-5-mini")
    assert lookup("gpt-5-mini").context_window == 400_000
    assert lookup("my-own-model") is None
    usage = Usage(input_tokens=100_000, output_tokens=10_000, cache_read_tokens=20_000)
    assert with_cost("claude-sonnet-4-5", usage).cost == pytest.approx(  # (below its 200k tier)
        0.08 * 3 + 0.01 * 15 + 0.02 * 0.3
    )
    assert with_cost("my-own-model", usage).cost is None


class _Status(Exception):
    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status_code = status
        self.body = {"error": {"message": message}}
        self.response = type("R", (), {"headers": headers or {}})()


def test_failures_are_classified_for_retries():
    limited = failure_from(_Status(429, "slow down", {"retry-after": "2"}))
    assert (limited.retryable, limited.retry_after) == (True, 2.0)
    assert failure_from(_Status(529, "overloaded")).retryable
    assert not failure_from(_Status(401, "bad key")).retryable
    too_long = failure_from(_Status(400, "prompt is too long: 250000 tokens > 200000 maximum"))
    assert (too_long.prompt_too_long, too_long.retryable) == (True, False)
    assert failure_from(ConnectionResetError("reset")).retryable


class _InStream(Exception):
    """An error the provider sent inside a 200 stream: no status of its own, a typed body."""

    def __init__(self, message: str, **error: str) -> None:
        super().__init__(message)
        self.body = {"error": {"message": message, **error}}


def test_an_error_inside_a_stream_is_retried_only_when_a_retry_can_help():
    bad_key = failure_from(_InStream("Incorrect API key provided", code="invalid_api_key"))
    assert (bad_key.retryable, bad_key.error) == (False, "_InStream: Incorrect API key provided")
    refused = failure_from(_InStream("no", type="invalid_request_error"))
    too_long = failure_from(
        _InStream(
            "This model's maximum context length is 8192 tokens", type="invalid_request_error"
        )
    )
    busy = failure_from(_InStream("The server had an error", type="server_error"))
    assert [f.retryable for f in (refused, too_long, busy)] == [False, False, True]
    assert (too_long.prompt_too_long, busy.prompt_too_long) == (True, False)


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses", "anthropic"])
async def test_a_model_never_closes_an_http_client_it_was_given(dialect, monkeypatch):
    """Who made the HTTP client closes it; the model closes only the pool it built itself."""
    import httpx2

    from loopwright.providers import make_model

    monkeypatch.setenv("LW_TEST_KEY", "k")
    endpoint = Endpoint(
        name="t", dialect=dialect, base_url="http://127.0.0.1:9", api_key_env="LW_TEST_KEY"
    )
    given = httpx2.AsyncClient()
    model = make_model(endpoint, "m", http_client=given)
    model._client()  # build the SDK client on this loop
    await model.aclose()
    assert not given.is_closed
    await given.aclose()
    own = make_model(endpoint, "m")
    sdk = own._client()
    await own.aclose()
    assert sdk.is_closed()
