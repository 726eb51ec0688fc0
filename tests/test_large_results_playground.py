"""A large tool result in the playground, in a real browser against `loopwright serve` (the
fixtures of test_playground_browser.py): the tool card shows the preview and an "open full
result" link; opening it shows the whole stored text, fetched from the session's results route."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from test_large_results_http import DUMPER, TEXT
from test_playground_browser import Server, browser, open_playground, page

__all__ = ["browser", "page"]  # the fixtures, used by name


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    project = tmp_path_factory.mktemp("large") / "project"
    (project / "agents" / "dumper").mkdir(parents=True)
    (project / "loopwright.toml").write_text("")
    (project / "agents" / "dumper" / "agent.py").write_text(DUMPER["agent.py"])
    running = Server(project)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


def test_a_stored_result_opens_in_full(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=dumper")
    page.get_by_test_id("message-input").fill("go")
    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("dumped")

    card = page.get_by_test_id("tool-card")
    expect(card.get_by_test_id("tool-output")).to_contain_text(
        "[Tool 'dump' returned 200000 characters, over its limit of 50000"
    )
    link = card.get_by_test_id("open-full-result")
    expect(link).to_have_text("open full result")
    link.click()
    full = card.get_by_test_id("full-result")
    expect(full).to_be_visible()
    assert full.text_content() == "go" + TEXT[2:]
