"""The one ASGI layer in front of the routes (`server.front`) keeps the order of the layers it
replaced: the security headers are on every answer, refusals too; the Host check comes before
CORS, and CORS before authentication (a preflight needs no token, a 401 carries the CORS
headers). And the full-profile final body, spliced from each event's `wire.dumps`, is byte for
byte the body `JSONResponse` made of `to_dict`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from starlette.responses import JSONResponse

from loopwright import Agent, tool
from loopwright.messages import ToolCall, ToolResultMessage, Usage
from loopwright.project import load_project
from loopwright.runtime import Runtime
from loopwright.server import create_app
from loopwright.server.prefix import V1, unprefixed
from loopwright.server.state import FullBody, run_events
from loopwright.server.views import final_body
from loopwright.store.opening import open_log
from loopwright.testing import FunctionModel, Reply
from test_server import make_project

TOKEN = "front-token-0123456789"
ORIGIN = "https://app.example.com"
SECURITY = ("x-content-type-options", "x-frame-options", "referrer-policy")


async def test_refusals_carry_the_security_headers_and_cors_sits_between_host_and_auth(
    tmp_path: Path,
):
    project = load_project(make_project(tmp_path / "p"))
    app = create_app(project, tokens={TOKEN: "acme"}, cors_origins=(ORIGIN,))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        host = await http.get("/agents", headers={"Host": "evil.example", "Origin": ORIGIN})
        unauthorised = await http.get("/agents", headers={"Origin": ORIGIN})
        preflight = await http.options(
            "/agents/shop/messages",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        )
        listed = await http.get("/v1/agents", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (host.status_code, host.json()) == (403, {"error": "host not allowed"})
    assert "access-control-allow-origin" not in host.headers  # (refused before CORS)
    assert (unauthorised.status_code, unauthorised.json()) == (
        401,
        {"error": "authorization required"},
    )
    assert unauthorised.headers["www-authenticate"] == "Bearer"
    assert unauthorised.headers["access-control-allow-origin"] == ORIGIN
    assert preflight.status_code == 200  # (no token needed)
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert [a["name"] for a in listed.json()["agents"]] == ["desk", "greeter", "shop"]
    for answer in (host, unauthorised, preflight, listed):
        assert [answer.headers[name] for name in SECURITY] == ["nosniff", "DENY", "no-referrer"]
        assert answer.headers["content-security-policy"].startswith("default-src 'self';")
    await app.state.loopwright.close()


def test_the_scope_is_copied_only_when_routing_changes_it():
    plain = {"type": "http", "path": "/agents/a", "raw_path": b"/agents/a"}
    assert unprefixed(plain) is plain
    v1 = {"type": "http", "path": "/v1/agents/a%2Fb", "raw_path": b"/v1/agents/a%2fb"}
    seen = unprefixed(v1)
    assert seen is not v1 and v1["path"] == "/v1/agents/a%2Fb"  # (the server's own stays)
    assert (seen["path"], seen["raw_path"], seen[V1]) == ("/agents/a%2Fb", b"/agents/a%2fb", True)
    escaped = {"type": "http", "path": "/agents/a b", "raw_path": b"/agents/a%20b"}
    assert unprefixed(escaped)["path"] == "/agents/a b"


@tool
def measure(x: float) -> str:
    """Measure."""
    return f"mesuré ✓ \u2028 {x!r}"


def _reply(request: object) -> Reply:
    usage = Usage(input_tokens=10, output_tokens=1)
    if isinstance(request.messages[-1], ToolResultMessage):  # type: ignore[attr-defined]
        key = "sk-ant-api03-" + "a" * 90  # (redacted in every body)
        return Reply(text=f'fait 😀 "q" \\ {key}', usage=usage)
    call = ToolCall(id="m1", name="measure", args={"x": 1e16})
    return Reply(tool_calls=(call,), usage=usage)


async def test_the_full_body_is_the_bytes_json_response_made(tmp_path: Path):
    log = await open_log(tmp_path / "log.db")
    agent = Agent(name="t", model=FunctionModel(_reply), tools=[measure])
    runtime = Runtime({"t": agent}, log)
    try:
        live = await runtime.send("default", "t", None, "hi")
        done = await live.wait()
        assert done is not None
        events = run_events(live)
        before = JSONResponse(final_body(live.key.id, done, events, "full")).body
        after = FullBody(final_body(live.key.id, done, events, "full", raw=True)).body
    finally:
        await runtime.close()
        await log.close()
    assert after == before
    data = json.loads(after)
    assert list(data) == ["text", "sessionId", "events", "stopReason"]
    assert "sk-ant-api03" not in data["text"] and len(data["events"]) == len(events)
