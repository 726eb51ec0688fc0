"""Approval links and webhooks through a served project (docs/notify.md): the shop pauses on a
refund, a receiver on 127.0.0.1 gets the signed notification with its links; opening a link
decides nothing (a GET, as a link scanner sends, leaves the item open), the page's form decides
once through the runtime's single-use authority and the run goes on; a used, expired or forged
link is a clear 4xx page; the resolution is notified too, and every attempt is listed. Then the
same in headless Chromium (a person clicks Approve), and a link printed by the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, serving
from loopwright.notify.signing import mint
from notify_receiver import SAFETY, Receiver
from test_cli import LOOPWRIGHT
from test_playground_browser import BROWSER_ARGS, CHROMIUM

SECRET = "whsec-links-0123456789"
LINK_SECRET = "links-key-0123456789abcdef"
BASE = "http://links.invalid"
"""`[notify] base_url` (the live server's port is not known when the project is written): the
tests open the links' paths on the live server."""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as running:
        yield running


@pytest.fixture
def live(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveServer]:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    monkeypatch.setenv("TEST_LINK_SECRET", LINK_SECRET)
    toml = f"""
[notify]
base_url = "{BASE}"
link_secret_env = "TEST_LINK_SECRET"

[[notify.webhook]]
url = "{receiver.url}"
secret_env = "TEST_HOOK_SECRET"
"""
    with serving(tmp_path / "shop", toml) as server:
        yield server


def on(live: LiveServer, link: str) -> str:
    assert link.startswith(f"{BASE}/links/")
    return live.url + link.removeprefix(BASE)


def pause(http: httpx.Client) -> dict[str, Any]:
    paused = http.post("/agents/shop/messages", json={"message": "refund A-1"})
    assert paused.status_code == 202, paused.text
    return paused.json()  # type: ignore[no-any-return]


def test_a_link_shows_the_call_and_only_its_form_decides_once(
    live: LiveServer, receiver: Receiver
) -> None:
    with live.client() as http:
        paused = pause(http)
        [got] = receiver.wait(1)
        body = got.body
        assert got.signed and (body["event"], body["id"]) == ("pending", paused["id"])
        assert (body["tool"], body["arguments"]) == ("refund", {"order": "A-1", "amount": 5})
        page = on(live, body["links"]["page"])
        assert body["links"]["approve"] == body["links"]["page"] + "?action=approve"

        for url in (page, on(live, body["links"]["approve"]), on(live, body["links"]["deny"])):
            shown = http.get(url)  # what a link scanner does: nothing is decided
            assert shown.status_code == 200
            assert shown.headers["cache-control"] == "no-store"
            assert "<code id='tool'>refund</code>" in shown.text
            assert "&quot;order&quot;: &quot;A-1&quot;" in shown.text
        assert [p["id"] for p in http.get("/pending").json()["items"]] == [paused["id"]]

        decide = page + "/decide"
        forged = f"{live.url}/links/{mint('default', paused['id'], time.time() + 60, 'x' * 20)}"
        expired = mint("default", paused["id"], time.time() - 1, LINK_SECRET)
        assert http.post(forged + "/decide", data={"action": "approve"}).status_code == 403
        for garbled in ("%C3%A9.x", "x", "%00.%FF"):  # never a 500
            assert http.get(f"{live.url}/links/{garbled}").status_code == 403
        gone = http.post(f"{live.url}/links/{expired}/decide", data={"action": "approve"})
        assert (gone.status_code, "This link has expired" in gone.text) == (410, True)
        assert http.get(f"{live.url}/links/{expired}").status_code == 410
        assert http.post(decide, data={"action": "maybe"}).status_code == 400
        cross = http.post(
            decide, data={"action": "approve"}, headers={"Origin": "https://evil.example"}
        )
        assert cross.status_code == 403  # another site's page cannot post the form
        assert [p["id"] for p in http.get("/pending").json()["items"]] == [paused["id"]]

        approved = http.post(decide, data={"action": "approve", "reason": "fine by me"})
        assert approved.status_code == 200
        assert "<p id='outcome'>Approved. The run goes on.</p>" in approved.text
        again = http.post(decide, data={"action": "deny"})
        assert again.status_code == 409
        assert "Already approved by link: this link is used up." in again.text
        assert http.get(page).status_code == 409

        resolved = receiver.wait(2)[1].body
        assert (resolved["event"], resolved["status"], resolved["decidedBy"]) == (
            "resolved",
            "approved",
            "link",
        )
        assert "links" not in resolved
        assert resolved["note"] == "fine by me"
        events = _until_done(http, paused["sessionId"])
        assert "tool:result" in events and events[-1] == "done"
        listed = http.get("/notifications", params={"item": paused["id"]}).json()["deliveries"]
        shown = receiver.url.removesuffix("/hook") + "/…"  # (never the URL's path)
        assert [(d["event"], d["state"], d["attempts"], d["target"]) for d in listed] == [
            ("resolved", "delivered", 1, shown),
            ("pending", "delivered", 1, shown),
        ]
        assert [t["status"] for d in listed for t in d["tried"]] == [200, 200]


def _until_done(http: httpx.Client, session: str) -> list[str]:
    """The session's event types once its resumed run logged `done` (followed, not polled)."""
    types: list[str] = []
    with http.stream("GET", f"/agents/shop/sessions/{session}/stream", params={"after": 0}) as s:
        for line in s.iter_lines():
            if line.startswith("data: "):
                types.append(json.loads(line[6:])["type"])
    return types


def test_the_cli_prints_a_link_the_server_honours(live: LiveServer, receiver: Receiver) -> None:
    with live.client() as http:
        paused = pause(http)
        env = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"}
        printed = subprocess.run(
            [LOOPWRIGHT, "approvals", "link", paused["id"], "--project", str(live.root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=SAFETY,
        )
        assert printed.returncode == 0, printed.stderr
        link = printed.stdout.strip()
        shown = http.get(on(live, link))
        assert shown.status_code == 200 and "refund" in shown.text
        denied = http.post(on(live, link) + "/decide", data={"action": "deny", "reason": "no"})
        assert "<p id='outcome'>Denied. The run goes on.</p>" in denied.text
        unknown = subprocess.run(
            [LOOPWRIGHT, "approvals", "link", paused["id"], "--project", str(live.root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=SAFETY,
        )
        assert unknown.returncode != 0 and "denied already (by link)" in unknown.stderr


@pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (/usr/bin/chromium); scripts/test installs it",
)
def test_a_person_approves_through_the_page_in_a_browser(
    live: LiveServer, receiver: Receiver
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with live.client() as http:
        paused = pause(http)
        link = on(live, receiver.wait(1)[0].body["links"]["approve"])
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
            try:
                page = browser.new_page()
                page.goto(link)
                expect(page.locator("h1")).to_have_text(
                    "Approve a tool call?", timeout=SAFETY * 1000
                )
                expect(page.locator("#tool")).to_have_text("refund")
                assert json.loads(page.locator("#arguments").inner_text()) == {
                    "order": "A-1",
                    "amount": 5,
                }
                assert [p["id"] for p in http.get("/pending").json()["items"]] == [paused["id"]]
                page.fill("#reason-input", "looks right")
                page.click("#approve")
                expect(page.locator("#outcome")).to_have_text(
                    "Approved. The run goes on.", timeout=SAFETY * 1000
                )
                page.goto(link)  # used up
                expect(page.locator("#outcome")).to_contain_text("this link is used up")
            finally:
                browser.close()
        events = _until_done(http, paused["sessionId"])
        assert "tool:result" in events and events[-1] == "done"
        assert http.get("/pending").json()["items"] == []


def test_a_question_is_answered_through_its_link(live: LiveServer, receiver: Receiver) -> None:
    with live.client() as http:
        asked = http.post("/agents/shop/messages", json={"message": "ask me"})
        assert asked.status_code == 202, asked.text
        body = receiver.wait(1)[0].body
        assert (body["kind"], body["tool"], body["arguments"]) == (
            "question",
            "ask_user",
            {"question": "Which colour?", "options": ["red", "blue"]},
        )
        assert set(body["links"]) == {"page", "answer"}
        page = on(live, body["links"]["answer"])
        shown = http.get(page)
        assert shown.status_code == 200 and "<textarea name='answer'" in shown.text
        decide = on(live, body["links"]["page"]) + "/decide"
        assert http.post(decide, data={"action": "answer", "answer": " "}).status_code == 400
        assert http.post(decide, data={"action": "approve"}).status_code == 400
        answered = http.post(decide, data={"action": "answer", "answer": "blue"})
        assert "<p id='outcome'>Answered. The run goes on.</p>" in answered.text
        events = _until_done(http, asked.json()["sessionId"])
        assert events[-1] == "done"
        resolved = receiver.wait(2)[1].body
        assert (resolved["status"], resolved["answer"], resolved["decidedBy"]) == (
            "answered",
            "blue",
            "link",
        )
