"""The server's safety: bearer tokens name tenants and every session, run and pending item is
reachable only by its own (another tenant's ids are 404), 401 without a token, loopback only
when no token is configured, the Host check, body size, CORS only when configured; and
items raised inside a subagent's session listed under the top-level session."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from loopwright import events as ev
from loopwright.errors import ConfigError
from loopwright.project import load_project
from loopwright.server import ServerSettings, create_app
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log
from test_server import LiveServer, body, make_project, serving

ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"
TOML = f"""\
[server]
allowed_hosts = ["agents.example.com"]
cors_origins = ["https://app.example.com"]
max_body_bytes = 2048

[auth.tokens]
"{ACME}" = "acme"

[[auth.token]]
env = "LW_TEST_GLOBEX_TOKEN"
tenant = "globex"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    os.environ["LW_TEST_GLOBEX_TOKEN"] = GLOBEX
    try:
        with serving(tmp_path_factory.mktemp("secure") / "shop", TOML) as live:
            yield live
    finally:
        del os.environ["LW_TEST_GLOBEX_TOKEN"]


@pytest.fixture(scope="module")
def acme(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(headers={"Authorization": f"Bearer {ACME}"}) as client:
        yield client


@pytest.fixture(scope="module")
def globex(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(headers={"Authorization": f"Bearer {GLOBEX}"}) as client:
        yield client


def test_a_token_is_required_except_for_public_pages(server: LiveServer):
    with server.client() as anonymous:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-0000000000"},
            {"Authorization": f"Basic {ACME}"},
        ):
            response = anonymous.get("/agents", headers=headers)
            assert body(response, 401) == {"error": "authorization required"}
            assert response.headers["www-authenticate"] == "Bearer"
        assert body(anonymous.post("/approvals/x/approve"), 401) == {
            "error": "authorization required"
        }
        assert body(anonymous.get("/health"), 200)["ok"] is True
        assert body(anonymous.get("/openapi.json"), 200)["openapi"].startswith("3.1")


def test_each_tenant_sees_only_its_own(acme: httpx.Client, globex: httpx.Client):
    paused = body(acme.post("/agents/shop/messages", json={"message": "refund A-1"}), 202)
    sid, pid = paused["sessionId"], paused["id"]
    assert paused["scope"]["tenant"] == "acme"
    session = f"/agents/shop/sessions/{sid}"
    unknown = {"error": f"no session '{sid}' for agent 'shop'"}
    for path in ("", "/events", "/stream", "/approvals", "/questions"):
        assert body(globex.get(session + path), 404) == unknown
    for path in ("/cancel", "/compact", "/resume"):
        assert body(globex.post(session + path), 404) == unknown
    assert body(globex.post(session + "/steer", json={"message": "x"}), 404) == unknown
    assert [s["id"] for s in body(globex.get("/agents/shop/sessions"), 200)["sessions"]] == []
    assert body(globex.get("/agents/shop/approvals"), 200) == {"approvals": [], "nextCursor": None}
    assert body(globex.get("/pending"), 200) == {"items": [], "nextCursor": None}
    for verb in ("approve", "deny"):
        assert body(globex.post(f"/approvals/{pid}/{verb}"), 404) == {
            "error": f"No pending approval '{pid}' (already decided, timed out, or never existed)."
        }
    # the same id is another session for another tenant (ids belong to tenant and agent)
    mine = globex.post("/agents/shop/messages", json={"message": "hi", "sessionId": sid})
    assert body(mine, 200)["text"] == "heard: hi"
    # the owner still has it all, untouched
    assert [i["id"] for i in body(acme.get("/pending"), 200)["items"]] == [pid]
    assert body(acme.post(f"/approvals/{pid}/approve"), 200)["text"] == "Done: refunded 5 on A-1"
    assert [s["id"] for s in body(acme.get("/agents/shop/sessions"), 200)["sessions"]] == [sid]


def test_a_subagents_items_are_listed_under_the_top_level_session(
    server: LiveServer, acme: httpx.Client, globex: httpx.Client
):
    greeted = body(
        acme.post("/agents/greeter/messages", json={"message": "hi", "sessionId": "g1"}), 200
    )
    assert greeted["text"] == "Hello there!"
    child = "g1/helper/c9"

    async def paused_child() -> None:  # what a subagent's run leaves when it pauses
        log = await open_log(server.root / ".loopwright" / "loopwright.db")
        key, parent = SessionKey("acme", "helper", child), SessionKey("acme", "greeter", "g1")
        try:
            claimed = await log.claim(key, "elsewhere", ttl=60, parent=parent)
            scope = ev.Scope(tenant="acme", environment="production", agent="helper")
            await log.append(
                claimed.lease,
                [
                    ev.Session(session_id=child),
                    ev.ApprovalPending(
                        id="apr_nested_1",
                        tool="lookup",
                        args={"q": 1},
                        scope=scope,
                        reason="matched rule 'ask'",
                        requested_at="2026-01-01T00:00:00.000Z",
                    ),
                    ev.PendingRequested(id="apr_nested_1", call_id="c1"),
                ],
            )
            await log.release(claimed.lease, "paused")
        finally:
            await log.close()

    asyncio.run(paused_child())
    listed = body(acme.get("/agents/greeter/sessions/g1/approvals"), 200)["approvals"]
    assert listed == [
        {
            "id": "apr_nested_1",
            "sessionId": "g1",
            "agent": "greeter",
            "tool": "lookup",
            "args": {"q": 1},
            "scope": {"tenant": "acme", "environment": "production", "agent": "helper"},
            "reason": "matched rule 'ask'",
            "requestedAt": "2026-01-01T00:00:00.000Z",
            "approveUrl": "/approvals/apr_nested_1/approve",
            "denyUrl": "/approvals/apr_nested_1/deny",
            "subagent": "helper",
            "subagentSessionId": child,
        }
    ]
    assert listed == body(acme.get("/agents/greeter/approvals"), 200)["approvals"]
    assert {**listed[0], "type": "approval"} in body(acme.get("/pending"), 200)["items"]
    assert body(acme.get("/agents/greeter/sessions/g1"), 200)["pending"] == [
        {**listed[0], "type": "approval"}
    ]
    assert [s["id"] for s in body(acme.get("/agents/greeter/sessions"), 200)["sessions"]] == ["g1"]
    assert body(globex.get("/pending"), 200) == {"items": [], "nextCursor": None}


def test_the_host_header_must_name_this_server(acme: httpx.Client):
    for host in (
        "localhost:1",
        "127.0.0.1",
        "[::1]:8787",
        "agents.example.com",
        "AGENTS.example.com:443",
    ):
        assert acme.get("/health", headers={"Host": host}).status_code == 200, host
    for host in ("evil.example", "localhost.evil.example", "127.0.0.1.nip.io:80", ""):
        assert body(acme.get("/health", headers={"Host": host}), 403) == {
            "error": "host not allowed"
        }


def test_the_playground_cannot_be_framed_and_runs_only_its_own_script(acme: httpx.Client):
    for path in ("/playground", "/static/playground.js", "/health", "/no-such-route"):
        headers = acme.get(path).headers
        assert headers["x-frame-options"] == "DENY", path
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["referrer-policy"] == "no-referrer", path
        policy = dict(
            p.strip().split(" ", 1) for p in headers["content-security-policy"].split(";")
        )
        assert policy["default-src"] == "'self'" and policy["frame-ancestors"] == "'none'", path


def test_the_body_limit_comes_from_the_settings(acme: httpx.Client):
    big = {"message": "x" * 3000}
    assert body(acme.post("/agents/shop/messages", json=big), 413) == {
        "error": "the request body is over 2048 bytes"
    }


def test_cors_only_for_configured_origins(acme: httpx.Client):
    preflight = {
        "Origin": "https://app.example.com",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    allowed = acme.options("/agents/shop/messages", headers=preflight)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
    refused = acme.options(
        "/agents/shop/messages", headers={**preflight, "Origin": "https://x.example"}
    )
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    simple = acme.get("/agents", headers={"Origin": "https://app.example.com"})
    assert simple.headers["access-control-allow-origin"] == "https://app.example.com"


async def test_without_tokens_only_loopback_clients_are_served_and_cors_is_off(tmp_path):
    app = create_app(load_project(make_project(tmp_path / "p")))

    async def get(client: tuple[str, int], **headers: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            return await http.get("/agents", headers=headers)

    for address in ("127.0.0.1", "127.8.0.1", "::1", "::ffff:127.0.0.1"):
        assert (await get((address, 5000))).status_code == 200, address
    for address in ("10.0.0.7", "192.168.1.2", "::ffff:10.0.0.1", "not-an-ip"):
        assert body(await get((address, 5000)), 403) == {
            "error": "only loopback clients are served when no token is configured"
        }
    local = await get(("127.0.0.1", 1), Origin="https://app.example.com")
    assert "access-control-allow-origin" not in local.headers
    await app.state.loopwright.close()


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"server": {"port": "80"}}, "[server] port must be an integer"),
        ({"server": {"port": 70000}}, "[server] port must be 0-65535, not 70000"),
        ({"server": {"allowed_hosts": "x"}}, "[server] allowed_hosts must be a list of strings"),
        ({"server": {"max_body_bytes": 0}}, "max_body_bytes and max_connections must be positive"),
        ({"auth": {"tokens": {"short": "t"}}}, "at least 16 characters"),
        ({"auth": {"tokens": {ACME: ""}}}, "the tenant must be a non-empty string"),
        (
            {"auth": {"token": [{"env": "LW_TEST_UNSET_VAR", "tenant": "t"}]}},
            "LW_TEST_UNSET_VAR is not set",
        ),
        ({"auth": {"token": [{"tenant": "t"}]}}, 'needs env = "VARIABLE"'),
    ],
)
def test_bad_settings_fail_clearly(settings: dict[str, Any], error: str):
    with pytest.raises(ConfigError) as caught:
        ServerSettings.from_project(settings)
    assert error in str(caught.value)


def test_settings_defaults_and_host_names():
    settings = ServerSettings.from_project({})
    assert (settings.host, settings.port, settings.max_body_bytes, settings.tokens) == (
        "127.0.0.1",
        8787,
        1 << 20,
        {},
    )
    assert settings.host_names() == {"localhost", "127.0.0.1", "[::1]"}
    wide = ServerSettings.from_project(
        {"server": {"host": "0.0.0.0", "allowed_hosts": ["A.example"]}}
    )
    assert wide.host_names() == {"localhost", "127.0.0.1", "[::1]", "a.example"}
    named = ServerSettings.from_project({}, host="box.local", port=9000)
    assert ("box.local" in named.host_names(), named.port) == (True, 9000)


async def test_a_page_of_another_site_cannot_post_here(tmp_path):
    """Without tokens, a browser on this machine is a loopback client: a page of another site
    (or of another port) must not run an agent or approve anything through it (CSRF)."""
    app = create_app(load_project(make_project(tmp_path / "p")))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    message = {"message": "hello"}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as http:
        for origin in ("https://evil.example", "http://127.0.0.1:3000", "null"):
            refused = await http.post(
                "/agents/shop/messages", json=message, headers={"Origin": origin}
            )
            assert body(refused, 403) == {"error": "cross-site request refused"}, origin
            assert body(await http.post("/approvals/x/approve", headers={"Origin": origin}), 403)
            assert (await http.get("/agents", headers={"Origin": origin})).status_code == 200
        assert await logged_sessions(app) == []  # nothing ran
        same = await http.post(
            "/agents/shop/messages", json=message, headers={"Origin": "http://127.0.0.1:8787"}
        )
        assert same.status_code == 200  # the playground itself (same origin)
        assert (await http.post("/agents/shop/messages", json=message)).status_code == 200  # curl
    assert len(await logged_sessions(app)) == 2
    await app.state.loopwright.close()


async def logged_sessions(app: Any) -> list[Any]:
    state = app.state.loopwright
    return list((await state.runtime.sessions("default")).items)
