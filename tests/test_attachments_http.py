"""`POST /agents/NAME/messages` with `attachments` beside `message`: the model gets the bytes,
the session's history holds references (v1 sees the text), bad and oversized attachments are
400 and 413, a model that cannot take images is refused before the run; a plain v1 message
is unchanged."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from live_server import LiveServer, write
from loopwright.project import load_project
from loopwright.server import create_app

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG64, PDF64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()
SHA = hashlib.sha256(PNG).hexdigest()

EYES = {
    "agent.py": """\
from loopwright import Agent
from loopwright.testing import FunctionModel


def look(request):
    last = request.messages[-1]
    seen = [f"{a.media_type} {len(a.data)} bytes" for a in last.attachments or ()]
    return f"{last.content}: " + ("; ".join(seen) or "nothing attached")


agent = Agent(name="eyes", model=FunctionModel(look))
""",
}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("eyes")
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "eyes", EYES)
    write(root / "agents" / "blind", {"agent.py": BLIND_PY})
    with LiveServer(create_app(load_project(root))) as live, live.client() as client:
        yield client


BLIND_PY = """\
from loopwright import Agent
from loopwright.testing import FunctionModel

agent = Agent(name="blind", model=FunctionModel(lambda r: "never", name="openai:deepseek-chat"))
"""


def answer(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def test_a_message_with_an_image_and_a_pdf(http: httpx.Client):
    files = [
        {"type": "image", "mediaType": "image/png", "data": PNG64, "name": "dot.png"},
        {"data": PDF64, "name": "report.pdf"},
    ]
    sent = {"message": "look", "attachments": files}
    done = answer(http.post("/agents/eyes/messages", json=sent), 200)
    assert done["text"] == f"look: image/png 70 bytes; application/pdf {len(PDF)} bytes"
    [received] = [e for e in done["events"] if e["type"] == "input:received"]
    image = {"type": "image", "mediaType": "image/png", "sha256": SHA, "size": 70}
    pdf = {
        "type": "document",
        "mediaType": "application/pdf",
        "sha256": hashlib.sha256(PDF).hexdigest(),
        "size": len(PDF),
        "name": "report.pdf",
    }
    user = {"role": "user", "content": "look", "attachments": [{**image, "name": "dot.png"}, pdf]}
    assert received["message"] == user
    sid = done["sessionId"]
    shown = answer(http.get(f"/agents/eyes/sessions/{sid}"), 200)
    assert shown["history"][0] == user
    v1 = answer(http.get(f"/v1/agents/eyes/sessions/{sid}"), 200)
    assert v1["history"][0] == {"role": "user", "content": "look"}  # v1 sees the text
    # the session goes on with the bytes read back from the log (the next request has them)
    again = {"message": "again", "sessionId": sid, "attachments": [{"data": PNG64}]}
    assert answer(http.post("/agents/eyes/messages", json=again), 200)["text"] == (
        "again: image/png 70 bytes"
    )


def test_a_plain_message_is_unchanged(http: httpx.Client):
    done = answer(http.post("/v1/agents/eyes/messages", json={"message": "hi"}), 200)
    assert done["text"] == "hi: nothing attached"


@pytest.mark.parametrize(
    ("attachment", "status", "error"),
    [
        ({"data": "not base64!"}, 400, "attachments[0]: an attachment: data is not valid base64"),
        (
            {"data": PNG64, "mediaType": "image/jpeg"},
            400,
            "attachments[0]: an attachment is declared image/jpeg but its bytes are image/png",
        ),
        (
            {"type": "document", "data": PNG64},
            400,
            "attachments[0]: an attachment is image/png, not an document",
        ),
        ({"name": "x"}, 400, "attachments[0] needs one of data (base64) or url, a string"),
        (
            {"url": "data:image/png;base64,@@"},
            400,
            "attachments[0]: an attachment: a data: URL that does not decode",
        ),
        (
            {"url": "ftp://example.com/x.png"},
            400,
            "attachments[0]: attachment URL must be http(s) or data: (ftp://example.com/x.png)",
        ),
    ],
)
def test_bad_attachments_are_refused(
    http: httpx.Client, attachment: dict[str, Any], status: int, error: str
):
    sent = {"message": "look", "attachments": [attachment]}
    assert answer(http.post("/agents/eyes/messages", json=sent), status) == {"error": error}


def test_an_attachment_over_the_bound_is_413(http: httpx.Client, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LOOPWRIGHT_MAX_ATTACHMENT_BYTES", "64")
    sent = {"message": "look", "attachments": [{"data": PNG64, "name": "dot.png"}]}
    assert answer(http.post("/agents/eyes/messages", json=sent), 413) == {
        "error": "attachments[0]: attachment dot.png is 70 B, over the limit of 64 B "
        "(LOOPWRIGHT_MAX_ATTACHMENT_BYTES)"
    }


def test_a_model_that_cannot_take_images_is_refused_before_the_run(http: httpx.Client):
    sent = {"message": "look", "attachments": [{"data": PNG64, "name": "dot.png"}]}
    assert answer(http.post("/agents/blind/messages", json=sent), 400) == {
        "error": "model openai:deepseek-chat does not take images "
        "([image: dot.png, image/png, 70 B])"
    }
    assert answer(http.get("/agents/blind/sessions"), 200)["sessions"] == []
