"""Images and documents on the wire: a real run per dialect against aimock (the local fake of
the three APIs) with an image and a PDF, the exact body each sends; a tool returning an image;
a model that cannot take images refused before any request."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from aimock import aimock
from conftest import drive
from loopwright import Agent, Session, tool
from loopwright.attachments import Attachment, AttachmentError, document, image
from loopwright.messages import UserMessage
from loopwright.models import ModelRequest
from loopwright.providers import Endpoint, make_model

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:The model 'claude-sonnet-4-5' is deprecated"),
]

KEY = "TEST_ATTACH_KEY"
ASK = "what is in these"
CLAUDE = "claude-sonnet-4-5"
# a 1x1 transparent PNG, and the smallest PDF header a sniffer accepts
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG64, PDF64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "test-key")


def recording() -> tuple[httpx2.AsyncClient, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        sent.append(json.loads(request.content))

    return httpx2.AsyncClient(event_hooks={"request": [keep]}), sent


def model_at(url: str, dialect: str, model: str, http: httpx2.AsyncClient) -> Any:
    base = url if dialect == "anthropic" else url + "/v1"
    name = "anthropic" if dialect == "anthropic" else "openai"
    endpoint = Endpoint(name=name, dialect=dialect, base_url=base, api_key_env=KEY)
    return make_model(endpoint, model, http_client=http)


USER_BODIES: dict[str, Any] = {
    "anthropic": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": ASK},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                },
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
                    "title": "report.pdf",
                },
            ],
        }
    ],
    "openai-chat": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": ASK},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "report.pdf",
                        "file_data": f"data:application/pdf;base64,{PDF64}",
                    },
                },
            ],
        }
    ],
    "openai-responses": [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": ASK},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG64}"},
                {
                    "type": "input_file",
                    "filename": "report.pdf",
                    "file_data": f"data:application/pdf;base64,{PDF64}",
                },
            ],
        }
    ],
}


@pytest.mark.parametrize("dialect", ["anthropic", "openai-chat", "openai-responses"])
async def test_an_image_and_a_pdf_in_each_dialect(tmp_path: Path, dialect: str):
    picture = tmp_path / "dot.png"
    picture.write_bytes(PNG)
    fixture = {"match": {"userMessage": ASK}, "response": {"content": "A dot and a report."}}
    http, sent = recording()
    name = CLAUDE if dialect == "anthropic" else "gpt-4o"
    with aimock(tmp_path, [fixture]) as url:
        model = model_at(url, dialect, name, http)
        session = Session(Agent(model=model))
        files = [picture, document(PDF, name="report.pdf")]
        result = await drive(session.run(ASK, attachments=files))
        await model.aclose()
    await http.aclose()
    assert result.text == "A dot and a report."
    [body] = sent
    assert (
        body["messages" if dialect != "openai-responses" else "input"][-1:]
        == (USER_BODIES[dialect])
    )
    # the history holds references: sha256, size and name, with the bytes beside them
    message = session.messages[0]
    assert isinstance(message, UserMessage)
    assert message.attachments == (
        image(PNG, name="dot.png"),
        Attachment(
            type="document",
            media_type="application/pdf",
            sha256=message.attachments[1].sha256,
            size=len(PDF),
            name="report.pdf",
        ),
    )


TOOL_IMAGE_BODIES: dict[str, Any] = {
    "anthropic": {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "CALL",
                "content": [
                    {"type": "text", "text": "the screen"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                    },
                ],
                "is_error": False,
            }
        ],
    },
    "openai-chat": [
        {"role": "tool", "tool_call_id": "CALL", "content": "the screen"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[images returned by tool screenshot (call CALL)]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
            ],
        },
    ],
    "openai-responses": [
        {"type": "function_call_output", "call_id": "CALL", "output": "the screen"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "[images returned by tool screenshot (call CALL)]"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG64}"},
            ],
        },
    ],
}


@pytest.mark.parametrize("dialect", ["anthropic", "openai-chat", "openai-responses"])
async def test_a_tool_returning_an_image(tmp_path: Path, dialect: str):
    @tool
    async def screenshot() -> list[Any]:
        """A picture of the screen."""
        return ["the screen", image(PNG, name="screen.png")]

    done = {"content": "A dot."}
    fixtures = [  # Chat and Responses: the images' user message comes after the results
        {"match": {"toolResultContains": "the screen"}, "response": done},
        {"match": {"userMessage": "[images returned by tool screenshot"}, "response": done},
        {
            "match": {"userMessage": ASK, "hasToolResult": False},
            "response": {"toolCalls": [{"name": "screenshot", "arguments": {}}]},
        },
    ]
    http, sent = recording()
    name = CLAUDE if dialect == "anthropic" else "gpt-4o"
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, dialect, name, http)
        session = Session(Agent(model=model, tools=[screenshot]))
        result = await drive(session.run(ASK))
        await model.aclose()
    await http.aclose()
    assert result.text == "A dot."
    [output] = [e for e in result.events if e.type == "tool:output"]
    assert output.content == "the screen"
    assert output.attachments == (image(PNG, name="screen.png"),)
    call_id = output.id
    second = sent[1]
    if dialect == "anthropic":
        got = second["messages"][-1]
        assert got == json.loads(json.dumps(TOOL_IMAGE_BODIES[dialect]).replace("CALL", call_id))
    else:
        key = "messages" if dialect == "openai-chat" else "input"
        want = json.loads(json.dumps(TOOL_IMAGE_BODIES[dialect]).replace("CALL", call_id))
        assert second[key][-2:] == want


async def test_a_model_that_cannot_take_images_is_refused_before_any_request(tmp_path: Path):
    http, sent = recording()
    model = model_at("http://127.0.0.1:9", "openai-chat", "deepseek-chat", http)
    session = Session(Agent(model=model))
    with pytest.raises(AttachmentError) as refused:
        session.run(ASK, attachments=[image(PNG, name="dot.png")])
    await model.aclose()
    await http.aclose()
    assert str(refused.value) == (
        "model openai:deepseek-chat does not take images ([image: dot.png, image/png, 70 B])"
    )
    assert sent == [] and session.messages == []


async def test_a_tool_image_for_a_text_only_model_fails_the_run_before_the_request(
    tmp_path: Path,
):
    @tool
    async def screenshot() -> Attachment:
        """A picture of the screen."""
        return image(PNG)

    fixtures = [
        {
            "match": {"userMessage": ASK, "hasToolResult": False},
            "response": {"toolCalls": [{"name": "screenshot", "arguments": {}}]},
        },
    ]
    http, sent = recording()
    with aimock(tmp_path, fixtures) as url:
        model = model_at(url, "openai-chat", "deepseek-chat", http)
        session = Session(Agent(model=model, tools=[screenshot]))
        result = await drive(session.run(ASK))
        await model.aclose()
    await http.aclose()
    assert len(sent) == 1  # the second request was never sent
    assert result.stop_reason == "error"
    [error] = [e for e in result.events if e.type == "loop:error"]
    assert "model openai:deepseek-chat does not take images" in error.error


async def body_of(dialect: str, message: UserMessage) -> Any:
    """The body of one request (to a transport that answers 500)."""
    sent: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        sent.append(json.loads(request.content))

    transport = httpx2.MockTransport(lambda request: httpx2.Response(500))
    http = httpx2.AsyncClient(transport=transport, event_hooks={"request": [keep]})
    model = model_at("http://fake", dialect, CLAUDE if dialect == "anthropic" else "gpt-4o", http)
    request = ModelRequest(system="", messages=[message])
    try:
        [failure] = [item async for item in model.stream(request)]
    finally:
        await model.aclose()
        await http.aclose()
    assert "HTTP 500" in failure.error
    [body] = sent
    return body


CAT, REPORT = "https://example.com/cat.jpg", "https://example.com/report.pdf"
BY_URL: dict[str, Any] = {
    "anthropic": [
        {"type": "text", "text": ASK},
        {"type": "image", "source": {"type": "url", "url": CAT}},
        {"type": "document", "source": {"type": "url", "url": REPORT}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "[document: a.txt]\nhi"},
            "title": "a.txt",
        },
    ],
    "openai-responses": [
        {"type": "input_text", "text": ASK},
        {"type": "input_image", "image_url": CAT},
        {"type": "input_file", "file_url": REPORT},
        {"type": "input_text", "text": "[document: a.txt]\nhi"},
    ],
}


@pytest.mark.parametrize("dialect", ["anthropic", "openai-responses"])
async def test_urls_and_plain_text_documents(dialect: str):
    files = (image(CAT), document(REPORT), document(b"hi", name="a.txt"))
    body = await body_of(dialect, UserMessage(content=ASK, attachments=files))
    key = "messages" if dialect == "anthropic" else "input"
    assert body[key] == [{"role": "user", "content": BY_URL[dialect]}]


async def test_chat_takes_no_pdf_by_url():
    message = UserMessage(content=ASK, attachments=(document(REPORT),))
    with pytest.raises(AttachmentError) as refused:
        await body_of("openai-chat", message)
    assert str(refused.value) == f"Chat Completions takes no PDF by URL ({REPORT})"
