"""The cost of a known model, end to end: a project agent on `claude-haiku-4-5` and one on
`gpt-5-mini`, served by aimock (the real providers, the real HTTP server, the stored usage rows),
priced from the catalog in the session's HTTP body and in `loopwright sessions show`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from aimock import aimock
from live_server import LiveServer
from loopwright.project import load_project
from loopwright.server import create_app
from test_cli_project import lw
from test_usage import ok, totals

pytestmark = [pytest.mark.filterwarnings(r"ignore:The model '.*' is deprecated")]

KEY = "TEST_COST_KEY"
CLAUDE = {"input_tokens": 1_000, "output_tokens": 200}  # (aimock passes no cache tokens)
GPT = {"prompt_tokens": 2_000, "completion_tokens": 500}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("cost")
    fixtures = [
        {"match": {"model": "claude-haiku-4-5"}, "response": {"content": "Hi.", "usage": CLAUDE}},
        {"match": {"model": "gpt-5-mini"}, "response": {"content": "Hi.", "usage": GPT}},
    ]
    with pytest.MonkeyPatch.context() as env, aimock(root, fixtures) as url:
        env.setenv(KEY, "test-key")
        (root / "loopwright.toml").write_text(
            f'[providers.claude]\nbase_url = "{url}"\ndialect = "anthropic"\n'
            f'api_key_env = "{KEY}"\n'
            f'[providers.gpt]\nbase_url = "{url}/v1"\ndialect = "openai-chat"\n'
            f'api_key_env = "{KEY}"\n'
        )
        for name, model in (("haiku", "claude:claude-haiku-4-5"), ("mini", "gpt:gpt-5-mini")):
            (root / "agents" / name).mkdir(parents=True)
            (root / "agents" / name / "agent.yaml").write_text(f"model: {model}\n")
        with LiveServer(create_app(load_project(root))) as live:
            live.root = root
            yield live


@pytest.mark.parametrize(
    ("agent", "tokens", "cost"),
    [
        # $1 in, $5 out per million (cache prices: tests/test_catalog.py)
        ("haiku", (1_000, 200), (1_000 * 1 + 200 * 5) / 1e6),
        # $0.25 in, $2 out per million
        ("mini", (2_000, 500), (2_000 * 0.25 + 500 * 2) / 1e6),
    ],
)
def test_a_known_models_cost_is_in_the_session_body_and_sessions_show(
    server: LiveServer, agent: str, tokens: tuple[int, int], cost: float
):
    with server.client() as http:
        answer = ok(http.post(f"/agents/{agent}/messages", json={"message": "hi"}))
        assert answer["text"] == "Hi."
        shown = ok(http.get(f"/agents/{agent}/sessions/{answer['sessionId']}"))
    usage: dict[str, Any] = shown["usage"]
    assert usage == totals(1, *tokens, pytest.approx(cost), 0)
    out = lw(server.root, "sessions", "show", answer["sessionId"], "--agent", agent)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("usage: "))
    assert line.endswith(f"· ${cost:,.4f} (with its subagents)"), line
    assert json.dumps(shown)  # (the body is JSON as served)
