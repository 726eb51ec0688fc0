"""`GET /lifecycle` on a real server: the tenant's lifecycle notifications as SSE frames, another
tenant's never; the full profile only."""

from __future__ import annotations

import httpx

from test_server_security import ACME, GLOBEX, acme, globex, server  # noqa: F401 (fixtures)
from test_server_stream import Frames


def names(tenant: str, session: str) -> dict[str, str]:
    return {"tenant": tenant, "agent": "shop", "sessionId": session}


def test_a_tenant_streams_its_sessions_lifecycle_only(
    acme: httpx.Client,  # noqa: F811
    globex: httpx.Client,  # noqa: F811
):
    with acme.stream("GET", "/lifecycle") as mine, globex.stream("GET", "/lifecycle") as theirs:
        acme_frames, globex_frames = Frames(mine), Frames(theirs)
        sent = acme.post("/agents/shop/messages", json={"message": "hello", "sessionId": "lc-1"})
        assert sent.status_code == 200, sent.text
        sent = globex.post("/agents/shop/messages", json={"message": "hello", "sessionId": "lc-2"})
        assert sent.status_code == 200, sent.text
        expected = [
            {"id": None, "event": {**names("acme", "lc-1"), "type": "session:created"}},
            {
                "id": None,
                "event": {**names("acme", "lc-1"), "status": "running", "type": "session:status"},
            },
            {
                "id": None,
                "event": {
                    **names("acme", "lc-1"),
                    "status": "idle",
                    "previous": "running",
                    "type": "session:status",
                },
            },
        ]
        assert acme_frames.read(3) == expected
        # globex's first frames are its own session's: acme's never reached it
        assert globex_frames.read(3) == [
            {"id": None, "event": {**frame["event"], **names("globex", "lc-2")}}
            for frame in expected
        ]


def test_the_lifecycle_stream_is_on_the_full_profile_only(acme: httpx.Client):  # noqa: F811
    for path, params in (("/v1/lifecycle", {}), ("/lifecycle", {"profile": "v1"})):
        response = acme.get(path, params=params)
        assert (response.status_code, response.json()) == (
            404,
            {"error": "lifecycle notifications are on the full profile only"},
        ), path
    response = acme.get("/lifecycle", params={"agent": "shop"})
    assert response.status_code == 400
