"""Structured output and truncation over HTTP: the final body's `output` (the value as JSON) and
`stopDetail`; a v1 client sees the text as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from live_server import LiveServer, write
from loopwright.project import load_project
from loopwright.server import create_app
from test_openapi_responses import validator

TAGGER = {
    "agent.yaml": """\
        model: scripted:script.yaml
        output_schema:
          type: object
          properties:
            tags: {type: array, items: {type: string}, minItems: 1}
          required: [tags]
        output_retries: 1
    """,
    "script.yaml": """\
        replies:
          - '{"tags": []}'
          - '{"tags": ["red", "round"]}'
    """,
}
CUT = {
    "agent.yaml": "model: scripted:script.yaml\n",
    "script.yaml": """\
        replies:
          - {text: "It was the best of", stop_reason: max_tokens}
    """,
}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("output")
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "tagger", TAGGER)
    write(root / "agents" / "cut", CUT)
    with LiveServer(create_app(load_project(root))) as live, live.client() as client:
        yield client


def valid(http: httpx.Client, path: str, data: Any) -> None:
    """`data`, the 200 answer of POST `path`, is valid against the server's OpenAPI document."""
    document = http.get("/openapi.json").json()
    schema = document["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
    validator(document, schema["schema"]).validate(data)


def answer(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def test_the_final_body_carries_the_structured_output(http: httpx.Client):
    done = answer(http.post("/agents/tagger/messages", json={"message": "an apple"}))
    assert done["output"] == {"tags": ["red", "round"]}
    assert done["text"] == '{"tags": ["red", "round"]}'
    assert done["stopReason"] == "completed"
    assert "stopDetail" not in done
    [invalid] = [e for e in done["events"] if e["type"] == "output:invalid"]
    assert invalid["errors"] == ["tags: [] should be non-empty"]
    assert invalid["message"]["role"] == "user"


def test_a_v1_client_sees_the_text(http: httpx.Client):
    done = answer(http.post("/v1/agents/tagger/messages", json={"message": "an apple"}))
    assert set(done) == {"text", "sessionId", "events"}
    assert done["text"] == '{"tags": ["red", "round"]}'
    assert "output:invalid" not in [e["type"] for e in done["events"]]


def test_a_cut_answer_ends_max_tokens(http: httpx.Client):
    """Full profile: `stopReason` `max_tokens`, and the deprecated `stopDetail` as before."""
    done = answer(http.post("/agents/cut/messages", json={"message": "begin"}))
    assert (done["text"], done["stopReason"], done["stopDetail"]) == (
        "It was the best of",
        "max_tokens",
        "max_tokens",
    )
    assert "output" not in done
    assert [e["type"] for e in done["events"]][-3:] == ["message:truncated", "loop:done", "done"]
    assert done["events"][-3] == {"type": "message:truncated", "detail": "max_tokens"}
    assert done["events"][-1] == {
        "type": "done",
        "text": "It was the best of",
        "stopReason": "max_tokens",
    }
    valid(http, "/agents/{name}/messages", done)


def test_a_v1_client_sees_a_cut_answer_as_completed(http: httpx.Client):
    """v1 sees what it saw before `max_tokens` was a stop reason: no `stopReason` (as for
    `completed`), no `stopDetail`, no `message:truncated`, a `done` without a reason."""
    done = answer(http.post("/v1/agents/cut/messages", json={"message": "begin"}))
    assert set(done) == {"text", "sessionId", "events"}
    assert done["text"] == "It was the best of"
    assert [e["type"] for e in done["events"]] == ["session", "budget:check", "loop:done", "done"]
    assert done["events"][-1] == {"type": "done", "text": "It was the best of"}
