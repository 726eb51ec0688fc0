"""Fallback models across providers, against aimock: each dialect's model failing (auth, overload,
a server error) hands the run to a model of another dialect, which answers; the request that
failed is sent again, whole, to the fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from aimock import aimock, journal
from conftest import drive
from loopwright import Agent, RetryPolicy, Session
from loopwright import events as ev
from loopwright.providers import Endpoint, make_model
from loopwright.testing import types

pytestmark = [pytest.mark.filterwarnings(r"ignore:The model '.*' is deprecated")]

KEY = "TEST_FALLBACK_KEY"
ASK = "what time is it"
MODELS = {"openai-chat": "gpt-5", "openai-responses": "gpt-5-mini", "anthropic": "claude-haiku-4-5"}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "test-key")


def model_at(url: str, dialect: str, http: httpx2.AsyncClient) -> Any:
    base = url if dialect == "anthropic" else url + "/v1"
    endpoint = Endpoint(name=dialect, dialect=dialect, base_url=base, api_key_env=KEY)
    return make_model(endpoint, MODELS[dialect], http_client=http)


def failing(status: int, kind: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": f"{kind} here"}, "status": status}


@pytest.mark.parametrize(
    ("primary", "backup", "error", "retries"),
    [
        ("openai-chat", "anthropic", failing(401, "authentication_error"), 0),
        ("anthropic", "openai-responses", failing(529, "overloaded_error"), 1),
        ("openai-responses", "openai-chat", failing(500, "server_error"), 1),
    ],
)
async def test_a_failing_dialect_falls_back_to_another(
    tmp_path: Path, primary: str, backup: str, error: dict[str, Any], retries: int
):
    fixtures = [
        {"match": {"model": MODELS[primary]}, "response": error},
        {"match": {"model": MODELS[backup], "userMessage": ASK}, "response": {"content": "Noon."}},
    ]
    http = httpx2.AsyncClient()
    with aimock(tmp_path, fixtures) as url:
        first, second = model_at(url, primary, http), model_at(url, backup, http)
        agent = Agent(
            model=first, fallback_models=[second], retry=RetryPolicy(attempts=1, backoff=0)
        )
        result = await drive(Session(agent).run(ASK))
        seen = [(e["body"]["model"], e["response"]["status"]) for e in journal(url)]
        await first.aclose()
        await second.aclose()
    await http.aclose()
    assert result.text == "Noon." and result.stop_reason == "completed"
    names = types(result.events)
    assert names[3 : 5 + retries] == ["budget:check", *["model:retry"] * retries, "model:fallback"]
    [switch] = [e for e in result.events if isinstance(e, ev.ModelFallback)]
    assert (switch.from_, switch.to) == (first.name, second.name)
    assert str(error["status"]) in switch.error
    status = error["status"]
    assert seen == [*[(MODELS[primary], status)] * (1 + retries), (MODELS[backup], 200)]
    reply = result.events[names.index("message:completed")]
    assert reply.message.model == second.name  # the usage row is the fallback's, priced as it
