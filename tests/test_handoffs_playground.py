"""A handoff in the playground, in a real browser (headless Debian Chromium, as
test_playground_browser.py, with a `loopwright serve` of its own project): a session whose
triage handed it to billing shows the handoff as a note in the conversation, between the
transfer and billing's answer, as `agent:handoff` in the timeline, and "with billing" in the
header; a session without a handoff shows no active agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import test_playground_browser as playground
from live_server import write
from test_handoffs_http import BILLING, TRIAGE
from test_playground_browser import Server, open_playground

pytestmark = playground.pytestmark  # (Chromium: skipped only where it is missing and CI unset)
browser, page = playground.browser, playground.page  # the fixtures (`server` is this module's)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root: Path = tmp_path_factory.mktemp("handoffs") / "project"
    root.mkdir()
    (root / "loopwright.toml").write_text("")
    write(root / "agents" / "triage", TRIAGE)
    write(root / "agents" / "billing", BILLING)
    running = Server(root)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


def test_a_handoff_shows_in_the_conversation_timeline_and_header(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    status, done = server.call("POST", "/agents/triage/messages", {"message": "refund please"})
    assert status == 200, (status, done, server.output())
    assert done["text"] == "Billing here."
    sid = done["sessionId"]

    open_playground(page, server, f"?agent=triage&session={sid}")
    note = page.get_by_test_id("handoff-note")
    expect(note).to_have_count(1)
    expect(note).to_have_text("→ handed off from triage to billing")
    expect(note).to_have_attribute("data-to", "billing")
    expect(page.get_by_test_id("active-agent")).to_have_text("with billing")
    expect(page.get_by_test_id("active-agent")).to_be_visible()
    items = page.locator("#chat-log > li").evaluate_all("els => els.map(e => e.dataset.testid)")
    assert [i for i in items if i in ("msg-user", "msg-assistant", "handoff-note")] == [
        "msg-user",
        "handoff-note",
        "msg-assistant",
    ], items
    logged = page.locator('[data-testid=timeline-item][data-type="agent:handoff"]')
    expect(logged).to_have_count(1)
    expect(logged).to_contain_text("triage → billing (history: full)")


def test_a_session_of_billing_alone_has_no_active_agent_shown(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    status, done = server.call("POST", "/agents/billing/messages", {"message": "hello"})
    assert status == 200, (status, done, server.output())
    open_playground(page, server, f"?agent=billing&session={done['sessionId']}")
    expect(page.get_by_test_id("msg-assistant")).to_have_count(1)
    expect(page.get_by_test_id("handoff-note")).to_have_count(0)
    expect(page.get_by_test_id("active-agent")).to_be_hidden()
