"""The playground's live status badges, in a real browser (headless Debian Chromium, as
test_playground_browser.py; its browser and page fixtures, a server of this module's own): a
session started by another HTTP client while the page is open appears in the sessions list
without a reload, and its badge follows `GET /lifecycle`: running (a tool holds the run until the
test lets it go), waiting (an approval, the other client holding its stream), idle once approved
over HTTP. At 390x844 the badge does not make the page scroll sideways."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import test_playground_browser as playground
from test_playground_browser import Server, by_id, open_playground
from test_playground_layout import no_sideways_scroll

pytestmark = playground.pytestmark  # (Chromium: skipped only where it is missing and CI unset)
browser, page = playground.browser, playground.page  # the fixtures

GATED = {
    "agent.yaml": "description: Holds, then asks for a refund.\nmodel: scripted:script.yaml\n",
    "script.yaml": """\
replies:
  - tool_calls: [{name: hold, args: {note: wait}}]
  - tool_calls: [{name: refund, args: {order: A-1, amount: 5}}]
  - text: Refunded.
""",
    "tools.py": '''\
import asyncio
from pathlib import Path

from loopwright import tool

GATE = Path(__file__).with_name("gate.fifo")


@tool
async def hold(note: str) -> str:
    """Wait until the test opens the gate.

    Args:
        note: Anything.
    """
    return await asyncio.to_thread(GATE.read_text)


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: The order's id.
        amount: How much to refund.
    """
    return f"refunded {amount} on {order}"
''',
    "rules.yaml": """\
default_decision: deny
rules:
  - {name: hold, tool: hold, decision: allow}
  - {name: refunds-need-approval, tool: refund, decision: ask}
""",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("statusbadge") / "project"
    (root / "agents" / "gated").mkdir(parents=True)
    (root / "loopwright.toml").write_text("# the status badge's browser test\n")
    for file, text in GATED.items():
        (root / "agents" / "gated" / file).write_text(text)
    os.mkfifo(root / "agents" / "gated" / "gate.fifo")
    running = Server(root)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


def open_gate(project_gate: Path) -> None:
    """Let the held tool go on: the write waits for the tool's read (a FIFO), then ends it."""
    with project_gate.open("w") as gate:
        gate.write("opened")


def frames_until(lines: Iterator[str], wanted: str) -> list[str]:
    """The event types of a held stream's frames, up to and with the first of type `wanted`."""
    seen: list[str] = []
    for line in lines:
        if line.startswith("data: "):
            seen.append(json.loads(line[6:])["type"])
            if seen[-1] == wanted:
                return seen
    raise AssertionError(f"the stream ended before {wanted}: {seen}")


def test_a_session_started_elsewhere_appears_and_its_badge_follows_its_status(
    page: Any, server: Server
) -> None:
    from playwright.sync_api import expect

    gate = Path(server.process.args[3]) / "agents" / "gated" / "gate.fifo"  # (serve --project P)
    open_playground(page, server, "?agent=gated")
    expect(page.locator("body[data-lifecycle=live]")).to_have_count(1)  # subscribed
    expect(page.get_by_test_id("sessions-list")).to_contain_text("No sessions yet.")

    with (
        httpx.Client(base_url=server.url, timeout=60) as other,
        other.stream(
            "POST",
            "/agents/gated/messages/stream",
            json={"message": "refund A-1", "sessionId": "elsewhere"},
        ) as held,
    ):
        assert held.status_code == 200, held.read()
        lines = held.iter_lines()
        listed = by_id(page, "session-item", "elsewhere", "data-session-id")
        expect(listed).to_have_count(1)  # listed without a reload
        badge = listed.get_by_test_id("session-status")
        expect(badge).to_have_text("running")
        expect(badge).to_have_attribute("class", "badge status-running")

        open_gate(gate)
        assert frames_until(lines, "approval:pending")[-1] == "approval:pending"
        expect(badge).to_have_text("waiting")
        expect(badge).to_have_attribute("class", "badge status-waiting")
        expect(badge).to_have_attribute("title", "waiting for a decision")

        page.set_viewport_size({"width": 390, "height": 844})
        expect(badge).to_be_visible()
        box = badge.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, box
        no_sideways_scroll(page)
        page.set_viewport_size({"width": 1400, "height": 900})

        [item] = other.get("/pending").json()["items"]
        approved = other.post(f"/approvals/{item['id']}/approve", json={"by": "ops"})
        assert approved.status_code == 200, approved.text
        rest = frames_until(lines, "done")
        assert rest[:2] == ["pending:requested", "pending:decided"], rest  # the held run went on
    expect(badge).to_have_text("idle")
    expect(badge).to_have_attribute("class", "badge status-idle")
    status, body = server.call("GET", "/agents/gated/sessions/elsewhere")
    assert (status, body["status"]) == (200, "idle")  # the stored status agrees
