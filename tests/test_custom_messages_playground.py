"""A custom message in the playground, in a real browser (headless Debian Chromium, as
test_playground_browser.py; its server and fixtures): an app's note added over HTTP between two
runs shows as a note in the conversation, between the turns, with its kind, and in the timeline
as `message:custom`."""

from __future__ import annotations

from typing import Any

import test_playground_browser as playground
from test_playground_browser import Server, open_playground

pytestmark = playground.pytestmark  # (Chromium: skipped only where it is missing and CI unset)
browser, page, server = playground.browser, playground.page, playground.server  # the fixtures


def test_a_custom_message_shows_as_a_note_in_the_conversation(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    status, done = server.call("POST", "/agents/assistant/messages", {"message": "hi"})
    assert status == 200, (status, done, server.output())
    sid = done["sessionId"]
    note = {"kind": "billing", "content": "the customer opened invoice 7", "data": {"n": 7}}
    status, added = server.call("POST", f"/agents/assistant/sessions/{sid}/messages", note)
    assert status == 201, added

    open_playground(page, server, f"?agent=assistant&session={sid}")
    shown = page.get_by_test_id("custom-note")
    expect(shown).to_have_count(1)
    expect(shown).to_have_attribute("data-kind", "billing")
    expect(shown).to_have_text("billing the customer opened invoice 7")
    expect(shown.locator(".custom-kind")).to_have_css("text-transform", "uppercase")
    # a note between the turns: after the user's message and the answer, in the log's order
    items = page.locator("#chat-log > li").evaluate_all("els => els.map(e => e.dataset.testid)")
    assert [i for i in items if i in ("msg-user", "msg-assistant", "custom-note")] == [
        "msg-user",
        "msg-assistant",
        "custom-note",
    ], items
    logged = page.locator('[data-testid=timeline-item][data-type="message:custom"]')
    expect(logged).to_have_count(1)
    expect(logged).to_have_attribute("data-seq", str(added["seq"]))
