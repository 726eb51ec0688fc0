"""The playground's "Attach file" button, in a real browser (the fixtures of
test_playground_browser.py): the picked image shows as a chip, then as a thumbnail in the sent
message; the server stored it as a reference of the session's first message; an opened session
shows it as a chip naming it."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

from test_playground_browser import Server, browser, by_id, open_playground, page, server

__all__ = ["browser", "page", "server"]  # the fixtures, used by name

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_an_attached_image_is_sent_and_shown(page: Any, server: Server, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    picture = tmp_path / "dot.png"
    picture.write_bytes(PNG)
    open_playground(page, server, "?agent=assistant")
    with page.expect_file_chooser() as chosen:
        page.get_by_test_id("attach-button").click()
    chosen.value.set_files(str(picture))
    expect(page.get_by_test_id("attachment-chip")).to_have_text(["📎 dot.png×"])
    page.get_by_test_id("message-input").fill("what is this?")
    page.get_by_test_id("send-button").click()

    said = page.get_by_test_id("msg-user")
    expect(said.get_by_test_id("msg-text")).to_have_text(["what is this?"])
    thumb = said.get_by_test_id("msg-thumb")
    expect(thumb).to_have_attribute("alt", "dot.png")
    expect(thumb).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("Hello!")
    expect(page.get_by_test_id("attachments-list")).to_be_hidden()  # sent: the list is empty

    session_id = page.get_by_test_id("session-id").get_attribute("data-session-id")
    status, shown = server.call("GET", f"/agents/assistant/sessions/{session_id}")
    assert status == 200, shown
    assert shown["history"][0] == {
        "role": "user",
        "content": "what is this?",
        "attachments": [
            {
                "type": "image",
                "mediaType": "image/png",
                "sha256": hashlib.sha256(PNG).hexdigest(),
                "size": len(PNG),
                "name": "dot.png",
            }
        ],
    }

    # opened again (from the sessions pane), the message shows its attachment by name
    page.get_by_test_id("new-session-button").click()
    by_id(page, "session-item", session_id, "data-session-id").click()
    expect(page.get_by_test_id("msg-user").get_by_test_id("msg-attachment")).to_have_text(
        ["📎 dot.png"]
    )
