""" "Fork from here" in the playground, in a real browser (headless Debian Chromium, as
test_playground_browser.py; its server and fixtures): a person forks a paused session from an
event of its timeline, lands in the new session — its lineage shown, its own approval to decide
— denies there, goes back to the original through the lineage link and finds it as it was."""

from __future__ import annotations

from typing import Any

import test_playground_browser as playground
from test_playground_browser import Server, by_id, open_playground, paused_by_api

pytestmark = playground.pytestmark  # (Chromium: skipped only where it is missing and CI unset)
browser, page, server = playground.browser, playground.page, playground.server  # the fixtures


def test_fork_from_an_event_lands_in_the_new_session(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    item = paused_by_api(server)
    source = item["sessionId"]
    status, shown = server.call("GET", f"/agents/shop/sessions/{source}")
    assert status == 200
    last = shown["lastSeq"]
    open_playground(page, server, f"?agent=shop&session={source}")
    done = page.locator(f'[data-testid=timeline-item][data-seq="{last}"]')
    expect(done).to_have_attribute("data-type", "done")
    expect(page.get_by_test_id("session-lineage")).to_be_hidden()  # not a fork

    done.hover()
    done.get_by_test_id("fork-button").click()

    label = page.get_by_test_id("session-id")
    expect(label).not_to_have_attribute("data-session-id", source)
    fork = label.get_attribute("data-session-id")
    assert fork
    lineage = page.get_by_test_id("session-lineage")
    expect(lineage).to_be_visible()
    expect(lineage).to_have_attribute("data-forked-from", source)
    expect(lineage).to_have_attribute("data-forked-at", str(last))
    expect(lineage).to_contain_text(f"at #{last}")
    timeline = page.get_by_test_id("timeline-item")
    expect(timeline).to_have_count(last)  # the fork's log: the source's events 1..last
    listed = by_id(page, "session-item", fork, "data-session-id")
    expect(listed.get_by_test_id("session-lineage-item")).to_contain_text(f"at #{last}")
    status, body = server.call("GET", f"/agents/shop/sessions/{fork}")
    assert status == 200 and body["forkedFrom"] == {"session": source, "seq": last}, body
    [mine] = body["pending"]
    assert mine["id"] != item["id"]

    card = by_id(page, "pending-card", mine["id"], "data-pending-id")
    card.get_by_test_id("deny-button").click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "denied")
    expect(timeline.last).to_have_attribute("data-type", "done")

    lineage.get_by_test_id("lineage-source").click()  # back to the original: still waiting
    expect(label).to_have_attribute("data-session-id", source)
    expect(page.get_by_test_id("session-lineage")).to_be_hidden()
    expect(by_id(page, "pending-card", item["id"], "data-pending-id")).to_be_visible()
    status, again = server.call("GET", f"/agents/shop/sessions/{source}")
    assert (status, again["lastSeq"], [p["id"] for p in again["pending"]]) == (
        200,
        last,
        [item["id"]],
    )
