"""A tool's label and its result's details in the playground, in a real browser against
`loopwright serve` (the fixtures of test_playground_browser.py): the card shows the label (the
name as its tooltip) and the details as a collapsed JSON view under the result, live and when
the session is opened again from the log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from test_playground_browser import Server, browser, open_playground, page
from test_tool_details_http import FILES

__all__ = ["browser", "page"]  # the fixtures, used by name


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    project = tmp_path_factory.mktemp("details") / "project"
    (project / "agents" / "files").mkdir(parents=True)
    (project / "loopwright.toml").write_text("")
    (project / "agents" / "files" / "agent.py").write_text(FILES["agent.py"])
    running = Server(project)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


def test_the_card_shows_the_label_and_the_details(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=files")
    page.get_by_test_id("message-input").fill("read a.md")
    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("read it")

    card = page.get_by_test_id("tool-card")
    name = card.get_by_test_id("tool-name")
    expect(name).to_have_text("Read file")
    expect(name).to_have_attribute("title", "read")
    expect(card.get_by_test_id("tool-output")).to_have_text("text of /srv/files/a.md")
    box = card.get_by_test_id("tool-details")
    expect(box).to_be_visible()
    assert box.get_attribute("open") is None  # collapsed until asked
    box.locator("summary").click()
    shown = card.get_by_test_id("tool-details-json")
    expect(shown).to_be_visible()
    assert json.loads(shown.text_content() or "") == {"diff": "+a", "lines": 3}

    page.reload()  # the same session, read back from the log
    card = page.get_by_test_id("tool-card")
    expect(card.get_by_test_id("tool-name")).to_have_text("Read file")
    again = card.get_by_test_id("tool-details-json")
    expect(again).to_be_attached()
    assert json.loads(again.text_content() or "") == {"diff": "+a", "lines": 3}
