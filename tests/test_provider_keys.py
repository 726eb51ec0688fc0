"""Keys per request (issue 35, row 4): a provider's key from a callable or a command, asked again
when aimock (started with `AIMOCK_API_KEYS`: it answers 401 to any other key) refuses it or when
its stated expiry passes; concurrent requests share one asking; a key that cannot be had is a
`loop:error` that names the command, never the key; no key reaches the log, logs or spans."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aimock import aimock
from conftest import drive
from loopwright import Agent, ConfigError, RetryPolicy, Session, get_model, redact, telemetry
from loopwright.messages import UserMessage
from loopwright.models import _PROVIDERS, _RESOLVED, ModelFailure, ModelRequest
from loopwright.providers import Endpoint, load_endpoints, make_model, register_endpoint
from loopwright.providers._keys import KeySource
from loopwright.runtime import open_session
from loopwright.store import open_log

STALE = "stale-key-0000aaaa1111"
FRESH = "fresh-key-2222bbbb3333"
NEXT = "next-key-4444cccc5555"
ASK = "what time is it"
FAST = RetryPolicy(attempts=2, backoff=0.01)
DIALECTS = ["openai-chat", "openai-responses", "anthropic"]


@pytest.fixture(autouse=True)
def forgotten() -> Iterator[None]:
    """Each test starts with none of these keys registered (a key asked for registers itself)."""
    yield
    redact.forget(STALE, FRESH, NEXT)


def fixture(content: str = "It is noon.") -> dict[str, Any]:
    return {"match": {"userMessage": ASK}, "response": {"content": content}}


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """aimock taking only FRESH and NEXT (it answers 401 `invalid_api_key` to anything else)."""
    monkeypatch.setenv("AIMOCK_API_KEYS", f"{FRESH},{NEXT}")
    with aimock(tmp_path, [fixture()]) as url:
        yield url


def sent_key(request: httpx2.Request) -> str:
    """The key a request carried (either dialect's header)."""
    value = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    return value.removeprefix("Bearer ")


@asynccontextmanager
async def model_at(url: str, dialect: str, key: Any, sent: list[str]) -> AsyncIterator[Any]:
    """A model at aimock asking `key` (a callable or a `KeySource`) for its key; `sent` collects
    the key of every request as it went out."""

    async def keep(request: httpx2.Request) -> None:
        sent.append(sent_key(request))

    http = httpx2.AsyncClient(event_hooks={"request": [keep]})
    name = "anthropic" if dialect == "anthropic" else "openai"
    base = url if dialect == "anthropic" else url + "/v1"  # (the Anthropic SDK adds /v1)
    endpoint = Endpoint(name=name, dialect=dialect, base_url=base)  # type: ignore[arg-type]
    model = make_model(endpoint, "gpt-4o-mini", api_key=key, http_client=http)
    try:
        yield model
    finally:
        await model.aclose()
        await http.aclose()


def keys(*given: Any) -> tuple[list[int], Any]:
    """A sync callable giving these values in turn, and the list counting its calls."""
    calls: list[int] = []

    def get() -> Any:
        calls.append(1)
        return given[len(calls) - 1]

    return calls, get


async def collect(model: Any) -> list[Any]:
    request = ModelRequest(system="You tell the time.", messages=[UserMessage(content=ASK)])
    return [item async for item in model.stream(request)]


# -- 401: one retry with the next key -------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_refused_key_is_asked_again_and_the_request_retried_once(served, dialect):
    calls, get = keys(STALE, FRESH)
    sent: list[str] = []
    async with model_at(served, dialect, get, sent) as model:
        result = await drive(Session(Agent(model=model, retry=FAST)).run(ASK))
    assert (result.stop_reason, result.text) == ("completed", "It is noon.")
    assert sent == [STALE, FRESH] and len(calls) == 2
    assert not [e for e in result.events if e.type == "model:retry"]  # (not the loop's retry)


async def test_a_second_refusal_is_not_retried_again(served):
    calls, get = keys(STALE, "still-wrong-key-9999", "never-asked-key-8888")
    sent: list[str] = []
    async with model_at(served, "openai-chat", get, sent) as model:
        result = await drive(Session(Agent(model=model, retry=FAST)).run(ASK))
    assert result.stop_reason == "error"
    assert result.events[-2].type == "loop:error"
    assert (
        result.events[-2].error == "model request failed: HTTP 401: Invalid API key"
    )  # (not retryable)
    assert sent == [STALE, "still-wrong-key-9999"] and len(calls) == 2


async def test_an_async_callable_s_key_is_kept_until_refused(served):
    given = iter([FRESH, NEXT])
    calls: list[int] = []

    async def get() -> str:
        calls.append(1)
        return next(given)

    sent: list[str] = []
    async with model_at(served, "openai-chat", get, sent) as model:
        agent = Agent(model=model)
        for _ in range(3):
            assert (await drive(Session(agent).run(ASK))).text == "It is noon."
    assert sent == [FRESH, FRESH, FRESH] and len(calls) == 1


async def test_an_endpoint_s_callable_is_shared_by_its_models(served):
    calls, get = keys(FRESH)
    endpoint = Endpoint(
        name="corp", dialect="openai-chat", base_url=served + "/v1", get_api_key=get
    )
    register_endpoint(endpoint)
    try:
        first, second = get_model("corp:gpt-4o-mini"), get_model("corp:gpt-4o")
        for model in (first, second):
            assert (await collect(model))[-1].message.text == "It is noon."
            await model.aclose()
    finally:
        _PROVIDERS.pop("corp")
        for spec in ("corp:gpt-4o-mini", "corp:gpt-4o"):
            _RESOLVED.pop(spec)
    assert len(calls) == 1  # one source: the endpoint's


# -- an expiry passes: asked before the request ---------------------------------------------------


async def test_a_key_past_its_stated_expiry_is_asked_again_before_the_request(served):
    now = [1000.0]
    calls, get = keys((FRESH, 1060.0), (NEXT, 1120.0))
    source = KeySource(get, clock=lambda: now[0])
    sent: list[str] = []
    async with model_at(served, "openai-chat", source, sent) as model:
        await collect(model)
        now[0] = 1059.9
        await collect(model)
        now[0] = 1060.0  # the stated expiry
        last = await collect(model)
    assert sent == [FRESH, FRESH, NEXT] and len(calls) == 2  # never a 401 in between
    assert last[-1].message.text == "It is noon."


async def test_a_command_s_key_lives_its_ttl(tmp_path: Path):
    now = [0.0]
    source = KeySource.command(printer(tmp_path, FRESH, NEXT), ttl=300)
    source.clock = lambda: now[0]
    assert [await source.get(), await source.get()] == [FRESH, FRESH]
    now[0] = 300.0
    assert await source.get() == NEXT
    assert ran(tmp_path) == 2


# -- concurrent requests: one asking --------------------------------------------------------------


async def test_concurrent_requests_share_one_asking(served):
    release, waiting = asyncio.Event(), asyncio.Event()
    calls: list[int] = []

    async def get() -> str:
        calls.append(1)
        await release.wait()
        return FRESH

    source = KeySource(get)
    entered: list[int] = []
    ask = source.get

    async def counted() -> str:  # (every request has asked once all four are in here)
        entered.append(1)
        if len(entered) == 4:
            waiting.set()
        return await ask()

    source.get = counted  # type: ignore[method-assign]
    sent: list[str] = []
    async with model_at(served, "openai-chat", source, sent) as model:
        runs = [asyncio.create_task(collect(model)) for _ in range(4)]
        await waiting.wait()
        release.set()
        replies = await asyncio.gather(*runs)
    assert len(calls) == 1 and sent == [FRESH] * 4
    assert [r[-1].message.text for r in replies] == ["It is noon."] * 4


async def test_concurrent_refusals_renew_once(served):
    calls, get = keys(STALE, FRESH, "a-third-key-never-asked")
    sent: list[str] = []
    async with model_at(served, "openai-chat", get, sent) as model:
        replies = await asyncio.gather(*[collect(model) for _ in range(4)])
    assert len(calls) == 2
    assert sorted(sent) == sorted([STALE] * 4 + [FRESH] * 4)
    assert [r[-1].message.text for r in replies] == ["It is noon."] * 4


# -- a key that cannot be had ---------------------------------------------------------------------


def printer(tmp: Path, *printed: str, fail: str | None = None) -> str:
    """A key command (python running a script) printing these keys in turn, counting its runs in
    `tmp/ran`; with `fail`, it says that on stderr and exits 3 instead."""
    script = tmp / "key.py"
    script.write_text(
        "import pathlib, sys\n"
        f"ran = pathlib.Path({str(tmp / 'ran')!r})\n"
        "n = len(ran.read_text()) if ran.exists() else 0\n"
        "ran.write_text('x' * (n + 1))\n"
        f"if {fail!r}:\n"
        f"    print({FRESH!r}); print({fail!r}, file=sys.stderr); sys.exit(3)\n"
        f"print({list(printed)!r}[n])\n"
    )
    return f"{sys.executable} {script}"


def ran(tmp: Path) -> int:
    return len((tmp / "ran").read_text())


async def test_a_failing_key_command_ends_the_run_with_an_error_naming_it(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    toml = tmp_path / "loopwright.toml"
    command = printer(tmp_path, fail="not logged in")
    toml.write_text(
        f'[providers.keyed]\nbase_url = "http://127.0.0.1:9/v1"\n'
        f"api_key_command = {json.dumps(command)}\n"
    )
    [endpoint] = load_endpoints(toml)
    model = make_model(endpoint, "gpt-4o-mini")
    result = await drive(Session(Agent(model=model, retry=FAST)).run(ASK))
    error = result.events[-2]
    assert (result.stop_reason, error.type) == ("error", "loop:error")
    program = repr(sys.executable)
    assert (
        error.error
        == f"model request failed: no API key: key command {program} exited with code 3: not logged in"
    )
    assert ran(tmp_path) == 1  # not retryable: asked once, and no request was sent
    assert FRESH not in caplog.text and FRESH not in str(result.events)
    assert f"no API key: key command {program} exited with code 3" in caplog.text


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("loopwright-no-such-command --x", "the key command of 'keyed' is not found"),
        ('printf "unbalanced', "No closing quotation"),
    ],
)
def test_a_key_command_that_cannot_run_is_a_config_error(tmp_path, command, said):
    toml = tmp_path / "loopwright.toml"
    toml.write_text(f"[providers.keyed]\napi_key_command = {json.dumps(command)}\n")
    with pytest.raises(ConfigError, match=said):
        make_model(load_endpoints(toml)[0], "m")


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("api_key_ttl = -1", "api_key_ttl must be a positive number of seconds, not -1"),
        ('api_key_command = "printf \\"x"', "api_key_command: No closing quotation"),
    ],
)
def test_a_bad_key_setting_is_one_error_naming_the_table(tmp_path, line, said):
    toml = tmp_path / "loopwright.toml"
    toml.write_text(f"[providers.keyed]\n{line}\n")
    with pytest.raises(ConfigError) as raised:
        load_endpoints(toml)
    assert str(raised.value) == f"{toml} [providers.keyed]: {said}"


async def test_a_callable_that_raises_is_an_error_without_its_text():
    def get() -> str:
        raise RuntimeError(f"token endpoint said: {FRESH}")

    endpoint = Endpoint(name="keyed", dialect="openai-chat", base_url="http://127.0.0.1:9/v1")
    items = await collect(make_model(endpoint, "m", api_key=get))
    assert items == [ModelFailure(error="no API key: keyed api_key raised RuntimeError")]


# -- never shown ----------------------------------------------------------------------------------


async def test_a_key_given_per_request_is_in_no_log_span_or_stored_event(
    tmp_path, monkeypatch, caplog
):
    """The model echoes the key it was given: every exit shows `[redacted]` in its place."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AIMOCK_API_KEYS", FRESH)
    spans, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.enable(provider, capture_content=True)
    _, get = keys(STALE, FRESH)
    log = await open_log(tmp_path / "db.sqlite")
    try:
        with aimock(tmp_path, [fixture(f"Your key is {FRESH}.")]) as url:
            async with model_at(url, "openai-chat", get, []) as model:
                session = await open_session(Agent(name="desk", model=model), log, "s1")
                result = await session.run(ASK).result()  # (raw in process: no drive)
    finally:
        await log.close()
        telemetry.disable()
        provider.shutdown()
    assert result.text == f"Your key is {FRESH}."  # (in process, as the model said it)
    stored = "\n".join(
        r[0] for r in sqlite3.connect(tmp_path / "db.sqlite").execute("SELECT data FROM events")
    )
    assert "Your key is [redacted]." in stored
    shown = json.dumps([json.loads(s.to_json()) for s in spans.get_finished_spans()])
    assert "Your key is [redacted]." in shown
    for out in (stored, shown, caplog.text):
        assert FRESH not in out and STALE not in out
    assert "openai answered 401: asking openai api_key for a fresh key" in caplog.text
