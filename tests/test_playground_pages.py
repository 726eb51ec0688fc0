"""The playground lists every page of a listing: a project with more sessions than one page of
`GET /agents/:a/sessions` (200 a page) shows them all in its sessions pane (before, only the
first page). In a real browser, as in test_playground_browser.py (whose fixtures it uses)."""

from __future__ import annotations

from typing import Any

from test_playground_browser import Server, browser, open_playground, page, server

__all__ = ["browser", "page", "server"]  # the fixtures, used by name

SESSIONS = 203


def test_the_sessions_pane_lists_every_page_of_sessions(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    for n in range(SESSIONS):
        sent = {"message": "hi", "sessionId": f"many-{n:03d}"}
        status, body = server.call("POST", "/agents/assistant/messages", sent)
        assert status == 200, (status, body, server.output())
    status, first = server.call("GET", "/agents/assistant/sessions?limit=200")
    assert status == 200 and len(first["sessions"]) == 200 and first["nextCursor"], first
    open_playground(page, server, "?agent=assistant")
    items = page.locator('[data-testid="session-item"][data-session-id^="many-"]')
    expect(items).to_have_count(SESSIONS)
    for n in (0, 101, SESSIONS - 1):
        expect(
            page.locator(f'[data-testid="session-item"][data-session-id="many-{n:03d}"]')
        ).to_have_count(1)
