"""The playground's session view shows the session's usage line (requests, tokens, cost, from
the session's body), and shows it for a new conversation once its first run from the page ends. In a real browser, as in
test_playground_browser.py (whose fixtures it uses)."""

from __future__ import annotations

import re
from typing import Any

from test_playground_browser import Server, browser, by_id, open_playground, page, server

__all__ = ["browser", "page", "server"]  # the fixtures, used by name


def test_the_session_view_shows_its_usage_and_updates_it(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    status, body = server.call(
        "POST", "/agents/assistant/messages", {"message": "hi", "sessionId": "spent-1"}
    )
    assert status == 200, (status, body, server.output())
    status, shown = server.call("GET", "/agents/assistant/sessions/spent-1")
    assert status == 200 and shown["usage"]["requests"] == 1, shown
    tokens = f"{shown['usage']['inputTokens']} in · {shown['usage']['outputTokens']} out"

    open_playground(page, server, "?agent=assistant")
    expect(page.get_by_test_id("session-cost")).to_be_hidden()  # a new conversation
    by_id(page, "session-item", "spent-1", "data-session-id").click()
    cost = page.get_by_test_id("session-cost")
    expect(cost).to_have_text(f"1 request · {tokens} · no price known")

    # a new conversation has no line until its first run from the page ends
    page.get_by_test_id("new-session-button").click()
    expect(cost).to_be_hidden()
    page.get_by_test_id("message-input").fill("hello")
    page.get_by_test_id("message-input").press("Enter")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("Hello!")
    expect(cost).to_have_text(re.compile(r"^1 request · \d+ in · \d+ out · no price known$"))
