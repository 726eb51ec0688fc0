"""`GET /docs` in a real browser: headless Debian Chromium (`/usr/bin/chromium`, driven by
Playwright) reads the reference page of a served test project. The page is Redoc, vendored
(no request leaves the server: the page's policy blocks any other origin, and the test checks
what was asked for), rendering the server's own `/openapi.json`: an operation with its request
body and answers, and the `Event` union with its members. The page is saved as
`tests/artifacts/api-docs.png`.

Skipped only when Chromium is missing and CI is not set (as the playground's browser test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_playground_browser import BROWSER_ARGS, CHROMIUM
from test_server import LiveServer, served

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (/usr/bin/chromium); scripts/test installs it",
)
ARTIFACTS = Path(__file__).parent / "artifacts"

server = served("api-docs")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        yield chromium
        chromium.close()


def document_types(server: LiveServer) -> list[str]:
    with server.client() as client:
        union = client.get("/openapi.json").json()["components"]["schemas"]["Event"]
    return sorted(union["discriminator"]["mapping"])


def test_the_docs_page_is_served_with_its_own_policy(http: httpx.Client) -> None:
    page = http.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/vendor-docs/redoc.standalone.js">' in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "style-src 'self' 'unsafe-inline'" in policy
    assert "script-src" not in policy  # (scripts: this server's files only, no inline ones)
    script = http.get("/static/vendor-docs/redoc.standalone.js")
    assert script.status_code == 200 and len(script.content) > 500_000
    assert "MIT" in http.get("/static/vendor-docs/LICENSE").text


def test_the_reference_renders_an_operation_and_the_event_union(
    browser: Any, server: LiveServer
) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    asked: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server.url}/docs")

    menu = page.get_by_role("menu")
    expect(menu.get_by_role("menuitem", name="Events")).to_be_visible()
    menu.get_by_role("menuitem", name="Runs").click()
    expect(menu.get_by_text("Send a message; answer when the run ends or pauses")).to_be_visible()

    send = page.locator("[data-section-id='operation/post-agents-name-messages']")
    expect(send).to_contain_text("/agents/{name}/messages")
    expect(send).to_contain_text("Request Body schema: application/json")
    expect(send).to_contain_text("message")  # the body's field, its kind and its bounds
    expect(send).to_contain_text("non-empty")
    expect(send).to_contain_text("The run paused on a pending item")  # (the 202)

    menu.get_by_role("menuitem", name="Events").click()
    events = page.locator("[id='tag/Events']")
    expect(events).to_contain_text("a tagged union on type")
    # the union's members, one per `type` (Redoc: a dropdown), the first one's fields shown
    options = events.locator("select").first.locator("option")
    expect(options).to_have_count(len(document_types(server)))
    for member in ("tool:started", "loop:done", "approval:pending"):
        expect(events.locator("select").first).to_contain_text(member)
    expect(events).to_contain_text('Enum: "allow" "ask" "deny"')  # actauth:decision's
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"))
    mine = [u for u in asked if u.startswith(server.url) or u.startswith("blob:" + server.url)]
    assert errors == []
    assert f"{server.url}/openapi.json" in asked
    assert [u for u in asked if u not in mine] in ([], ["https://cdn.redoc.ly/redoc/logo-mini.svg"])
    page.close()
