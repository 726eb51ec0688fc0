"""What a real server answers validates against its own OpenAPI document: a served test project
(the shop: scripted replies, refunds a human approves, questions) is driven through every JSON
operation of the document (and a held stream, each event of it), and each body is validated
against the schema the document gives for that operation and status. The document is also
strict enough to be worth it: bodies and events that are not the server's fail."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from test_server import LiveServer, served

server = served("openapi-responses")

JSON_OPERATIONS = 39
"""The document's operations that answer JSON (its two approval-link pages answer HTML)."""


@pytest.fixture(scope="module")
def document(server: LiveServer) -> dict[str, Any]:
    with server.client() as client:
        return client.get("/openapi.json").json()  # type: ignore[no-any-return]


def validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """`schema` validated with the document as its root (its `#/components/...` resolve)."""
    return Draft202012Validator({**document, **schema})


class Checked:
    """Requests sent through `call`, each answer validated against the document."""

    def __init__(self, http: httpx.Client, document: dict[str, Any]) -> None:
        self.http, self.document = http, document
        self.operations: set[str] = set()

    def call(self, method: str, template: str, status: int, **values: Any) -> Any:
        """`method template` (its `{name}` and `{id}` filled from `values`) answered `status`,
        with a body valid against the document's schema for it; the body."""
        params, body = values.pop("params", None), values.pop("json", None)
        path = template.format(**values)
        response = self.http.request(method, path, params=params, json=body)
        assert response.status_code == status, (method, path, response.text)
        assert response.headers["content-type"].startswith("application/json")
        operation = self.document["paths"][template][method.lower()]
        answer = operation["responses"][str(status)]
        schema = answer["content"]["application/json"]["schema"]
        data = response.json()
        validator(self.document, schema).validate(data)
        self.operations.add(f"{method} {template}")
        return data


SESSION = "/agents/{name}/sessions/{id}"


def test_every_json_answer_validates_against_the_document(
    http: httpx.Client, document: dict[str, Any]
) -> None:
    c = Checked(http, document)
    assert c.call("GET", "/health", 200)["ok"] is True
    assert "shop" in [a["name"] for a in c.call("GET", "/agents", 200)["agents"]]
    assert c.call("GET", "/agents/{name}/config", 200, name="shop")["name"] == "shop"
    c.call("GET", "/agents/{name}/config", 404, name="nobody")

    said = c.call("POST", "/agents/{name}/messages", 200, name="shop", json={"message": "hi"})
    sid = said["sessionId"]
    assert said["stopReason"] == "completed"
    v1 = c.call(
        "POST", "/agents/{name}/messages", 200, name="shop", params={"profile": "v1"},
        json={"message": "hello", "sessionId": sid},
    )  # fmt: skip
    assert v1["events"][0]["type"] == "session"
    c.call("GET", SESSION, 200, name="shop", id=sid)
    paged = c.call("GET", SESSION, 200, name="shop", id=sid, params={"limit": 1})
    assert paged["historyLength"] == 4 and paged["nextCursor"] is not None
    c.call("GET", SESSION, 200, name="shop", id=sid, params={"profile": "v1"})
    c.call("GET", SESSION, 404, name="shop", id="nope")
    page = c.call("GET", f"{SESSION}/events", 200, name="shop", id=sid, params={"limit": 3})
    assert [e["seq"] for e in page["events"]] == [1, 2, 3] and page["more"] is True
    c.call("GET", f"{SESSION}/events", 200, name="shop", id=sid, params={"profile": "v1"})
    c.call("GET", f"{SESSION}/events", 400, name="shop", id=sid, params={"after": "x"})
    assert c.call("POST", f"{SESSION}/cancel", 200, name="shop", id=sid) == {"cancelled": False}
    c.call("POST", f"{SESSION}/steer", 409, name="shop", id=sid, json={"message": "faster"})
    assert c.call("POST", f"{SESSION}/compact", 200, name="shop", id=sid)["sessionId"] == sid
    assert c.call("POST", f"{SESSION}/replay", 200, name="shop", id=sid)["ok"] is True
    forked = c.call("POST", f"{SESSION}/fork", 201, name="shop", id=sid, json={"at": 3})
    assert forked["forkedFrom"] == {"session": sid, "seq": 3}
    c.call("POST", f"{SESSION}/resume", 409, name="shop", id=sid)
    traced = c.call("GET", f"{SESSION}/trace", 200, name="shop", id=sid)
    assert traced["sessionId"] == sid and traced["totals"]["steps"] == len(traced["steps"]) > 0
    c.call("GET", f"{SESSION}/trace", 404, name="shop", id="nope")
    listed = c.call("GET", "/agents/{name}/sessions", 200, name="shop")["sessions"]
    assert {sid, forked["sessionId"]} <= {s["id"] for s in listed}
    note = {"kind": "note", "content": "seen", "data": {"n": 1}}
    added = c.call("POST", f"{SESSION}/messages", 201, name="shop", id=sid, json=note)
    assert added["event"] == {"type": "message:custom", "message": {"role": "custom", **note}}
    c.call("POST", f"{SESSION}/messages", 400, name="shop", id=sid, json={"content": "x"})

    paused = c.call("POST", "/agents/{name}/messages", 202, name="shop", json={"message": "refund"})
    rid, item = paused["sessionId"], paused["id"]
    assert (paused["type"], paused["tool"]) == ("approval", "refund")
    assert [i["id"] for i in c.call("GET", "/pending", 200)["items"]] == [item]
    c.call("GET", "/agents/{name}/approvals", 200, name="shop")
    c.call("GET", "/agents/{name}/questions", 200, name="shop")
    c.call("GET", f"{SESSION}/approvals", 200, name="shop", id=rid)
    c.call("GET", f"{SESSION}/questions", 200, name="shop", id=rid)
    c.call("POST", "/questions/{id}/answer", 400, id=item, json={"answer": "no"})
    done = c.call("POST", "/approvals/{id}/approve", 200, id=item, json={"by": "ops"})
    assert done["text"] == "Done: refunded 5 on A-1"
    again = c.call("POST", "/approvals/{id}/deny", 200, id=item)
    assert again["alreadyResolved"] is True

    asked = c.call("POST", "/agents/{name}/messages", 202, name="shop", json={"message": "ask"})
    answered = c.call("POST", "/questions/{id}/answer", 200, id=asked["id"], json={"answer": "red"})
    assert answered["sessionId"] == asked["sessionId"]
    asked = c.call("POST", "/agents/{name}/messages", 202, name="shop", json={"message": "ask"})
    durable = c.call("POST", "/pending-questions/{id}/answer", 200, id=asked["id"],
                     json={"answer": "blue"})  # fmt: skip
    assert durable["sessionId"] == asked["sessionId"]
    two = c.call(
        "POST", "/agents/{name}/messages", 202, name="shop", json={"message": "two refunds"}
    )
    first, second = two["pendingIds"]
    decide = {"decision": "approve"}
    waiting = c.call("POST", "/pending-approvals/{id}/resolve", 200, id=first, json=decide)
    assert waiting == {"resolved": True, "outstanding": 1}
    went_on = c.call("POST", "/pending-approvals/{id}/resolve", 200, id=second, json=decide)
    assert went_on["stopReason"] == "completed"
    assert c.call("POST", "/pending-approvals/{id}/resolve", 200, id=second, json=decide) == {
        "alreadyResolved": True
    }

    groups = c.call("GET", "/usage", 200, params={"by": "agent"})["groups"]
    assert [g["agent"] for g in groups] == ["shop"]
    assert c.call("GET", "/notifications", 200) == {"deliveries": [], "nextCursor": None}
    assert c.call("POST", "/rules/check", 200, json={"agent": "shop"})["tenant"] == "default"
    agui = "/agents/{name}/agui"  # (its 200 streams AG-UI events: tests/test_agui.py)
    assert c.call("POST", agui, 422, name="shop", json={"threadId": "t"})["details"]
    c.call("POST", agui, 404, name="nobody", json={"threadId": "t"})
    card = "/a2a/{name}/.well-known/agent-card.json"  # (the rest: tests/test_a2a.py)
    assert c.call("GET", card, 200, name="shop")["name"] == "shop"
    c.call("GET", card, 404, name="nobody")
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}
    refused = c.call("POST", "/a2a/{name}", 200, name="shop", json=rpc)["error"]  # (no A2A-Version)
    assert (refused["code"], refused["message"]) == (
        -32009,
        "A2A version '0.3' is not supported by this handler. Expected version '1.0'.",
    )
    files = "/admin/agents/{name}/files/{file}"  # (loopback is no admin: tests/test_admin_http.py)
    c.call("GET", "/admin/agents", 403)
    c.call("POST", "/admin/agents", 403, json={"name": "x"})
    c.call("GET", files, 403, name="shop", file="rules.yaml")
    c.call("PUT", files, 403, name="shop", file="rules.yaml", json={"text": ""})

    json_operations = {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, op in item.items()
        if any("application/json" in r.get("content", {}) for r in op["responses"].values())
        and not path.startswith("/links/")
    }
    streamed = {"POST /agents/{name}/messages/stream", f"GET {SESSION}/stream"}
    streamed.add(f"GET {SESSION}/results/{{ref}}")  # text/plain (tests/test_large_results_http.py)
    streamed.add("GET /lifecycle")  # SSE (tests/test_lifecycle_http.py)
    assert len(json_operations) == JSON_OPERATIONS
    assert c.operations == json_operations - streamed


def test_a_streamed_run_s_events_validate_against_the_document(
    http: httpx.Client, document: dict[str, Any]
) -> None:
    events = validator(document, {"$ref": "#/components/schemas/Event"})
    seen = []
    with http.stream(
        "POST", "/agents/shop/messages/stream", json={"message": "hi there"}
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                events.validate(event)
                seen.append(event["type"])
    assert seen[0] == "session" and seen[-1] == "done" and "message:completed" in seen


@pytest.mark.parametrize(
    ("component", "wrong"),
    [
        ("Event", {"type": "tool:started"}),  # (no call id, no name)
        ("Event", {"type": "no:such-event"}),
        ("Event", {"type": "done", "text": "x", "stopReason": "finished"}),
        ("V1Event", {"type": "text:delta", "delta": "x"}),  # (not a v1 event)
        ("Final", {"sessionId": "s", "events": []}),  # (no text)
        ("Final", {"text": "x", "sessionId": "s", "events": [{"type": "nope"}]}),
        ("Final", {"text": "x", "sessionId": "s", "events": [], "stopReason": None}),  # (absent)
        ("Paused", {"pending": True, "type": "approval", "id": "p", "sessionId": "s"}),
        ("Sessions", {"sessions": [{"id": "s"}], "nextCursor": None}),
        ("ErrorBody", {"message": "no"}),
    ],
)
def test_the_document_rejects_what_the_server_does_not_send(
    document: dict[str, Any], component: str, wrong: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        validator(document, {"$ref": f"#/components/schemas/{component}"}).validate(wrong)


def test_event_is_the_generated_tagged_union(document: dict[str, Any]) -> None:
    """`Event` is the generated schema's union, each member a component of its own."""
    from loopwright.wire import event_schema

    generated = event_schema()
    union = document["components"]["schemas"]["Event"]
    assert len(union["oneOf"]) == len(generated["oneOf"]) > 40
    assert union["discriminator"]["propertyName"] == "type"
    mapping = union["discriminator"]["mapping"]
    assert mapping["tool:started"] == "#/components/schemas/ToolStarted"
    assert document["components"]["schemas"]["ToolStarted"] == json.loads(
        json.dumps(generated["$defs"]["ToolStarted"]).replace("#/$defs/", "#/components/schemas/")
    )
