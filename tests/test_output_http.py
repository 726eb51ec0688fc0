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


def test_a_cut_answer_has_its_stop_detail(http: httpx.Client):
    done = answer(http.post("/agents/cut/messages", json={"message": "begin"}))
    assert (done["text"], done["stopReason"], done["stopDetail"]) == (
        "It was the best of",
        "completed",
        "max_tokens",
    )
    assert "output" not in done
    assert [e["type"] for e in done["events"]][-3:] == ["message:truncated", "loop:done", "done"]
    assert done["events"][-3] == {"type": "message:truncated", "detail": "max_tokens"}
