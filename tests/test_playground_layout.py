"""What the playground renders, in a real browser at a desktop's size (1280×800) and a phone's
(390×844): assistant replies as Markdown, sanitised (an injected `<script>`, `onerror` handler
or `javascript:` link never reaches the page) with highlighted code; sessions listed by title
(a model-written one with `[titles]`);
the trace view's durations, tokens and cost (as `GET .../trace` gives them); an approval decided
from the phone layout without a nested scroll area; the approval-link page on a phone; and at
both sizes no sideways scrolling.

Screenshots of each view are saved under `$LOOPWRIGHT_SHOTS` (default tests/artifacts/shots)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from live_server import serving
from loopwright.notify.signing import mint
from test_playground_browser import (
    ARTIFACTS,
    SHOP,
    Server,
    browser,
    by_id,
    open_playground,
    paused_by_api,
)
from test_titles_http import sent, settled

__all__ = ["browser"]  # the fixture, used by name

SHOTS = Path(os.environ.get("LOOPWRIGHT_SHOTS") or ARTIFACTS / "shots")
LINK_SECRET = "a-link-secret-for-the-playground-tests"
DESKTOP, PHONE = (1280, 800), (390, 844)
SIZES = pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])

WRITER = {
    "agent.yaml": "description: Writes Markdown.\nmodel: scripted:script.yaml\n",
    "script.yaml": """\
replies:
  - chunk: 16
    text: |
      ## Your order

      | item | qty | note |
      |------|-----|------|
      | tea  | 2   | loose-leaf, the long name of a very particular blend from far away |

      ```python
      def total(items):
          return sum(item.price for item in items)
      ```

      <script>window.__pwned = "script"</script>

      <img src="data:," onerror="window.__pwned = 'onerror'">

      [a link](javascript:window.__pwned='link') and `inline code`.
""",
}
TRACER = {
    "agent.yaml": "description: Weighs parcels.\nmodel: scripted:script.yaml\n",
    "script.yaml": """\
replies:
  - tool_calls: [{name: weigh, args: {parcel: P-7}}]
    usage: {input_tokens: 120, output_tokens: 30, cost: 0.0123}
  - text: It weighs 2 kg.
    usage: {input_tokens: 200, output_tokens: 12, cost: 0.0021}
""",
    "tools.py": '''\
from loopwright import tool


@tool
def weigh(parcel: str) -> str:
    """Weigh a parcel.

    Args:
        parcel: The parcel's id.
    """
    return f"{parcel}: 2 kg"
''',
    "rules.yaml": "default_decision: allow\nrules: []\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("layout") / "project"
    root.mkdir()
    toml = '[notify]\nlink_secret_env = "PLAYGROUND_LINK_SECRET"\n'
    (root / "loopwright.toml").write_text(toml)
    for name, files in {"shop": SHOP, "writer": WRITER, "tracer": TRACER}.items():
        for file, text in files.items():
            (root / "agents" / name / file).parent.mkdir(parents=True, exist_ok=True)
            (root / "agents" / name / file).write_text(text)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PLAYGROUND_LINK_SECRET", LINK_SECRET)
        running = Server(root)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


@pytest.fixture
def page(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page of the test's `size`; JavaScript errors on it, or a 404, fail the test."""
    width, height = request.node.callspec.params["size"]
    context = browser.new_context(viewport={"width": width, "height": height})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda m: errors.append(m.text) if failed(m) else None)
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"errors on the page: {errors}\nserver log:\n{server.output()}"


def failed(message: Any) -> bool:
    """Whether a console message is an error; but not Chromium's report that the sanitiser's
    own inert parse of a reply (DOMParser, in vendor/purify.es.mjs) met an inline handler: the
    page's CSP applies there too, and DOMPurify then removes the handler (the test checks)."""
    return message.type == "error" and not (
        message.text.startswith("Executing inline event handler violates")
        and message.location["url"].endswith("/static/vendor/purify.es.mjs")
    )


def no_sideways_scroll(page: Any) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"]
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)


def send(page: Any, text: str) -> None:
    page.get_by_test_id("message-input").fill(text)
    page.get_by_test_id("send-button").click()


@SIZES
def test_a_reply_is_rendered_as_sanitised_markdown_with_highlighted_code(
    page: Any, server: Server, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=writer")
    send(page, "What did I order?")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    reply = page.get_by_test_id("msg-assistant").get_by_test_id("msg-text")
    expect(reply.locator("h2")).to_have_text("Your order")
    expect(reply.locator("table th")).to_have_text(["item", "qty", "note"])
    expect(reply.locator("table td").first).to_have_text("tea")
    code = reply.locator("pre > code.hljs")
    expect(code).to_have_attribute("data-language", "python")
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    expect(reply.locator("p code")).to_have_text("inline code")
    # the injected markup is gone: no script, no handler, no javascript: link, nothing ran
    assert reply.locator("script").count() == 0
    assert page.locator("[onerror]").count() == 0
    assert page.locator("a[href^='javascript' i]").count() == 0
    expect(reply.locator("a")).to_have_text("a link")  # (the text stays, its href does not)
    assert page.evaluate("window.__pwned") is None
    expect(reply.locator("img")).to_have_count(1)  # an image is fine, its handler is not
    no_sideways_scroll(page)
    shot(page, "playground-markdown")


@SIZES
def test_sessions_are_listed_by_title_with_their_id_second(
    page: Any, server: Server, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    first = f"Where is   my parcel\nP-{size[0]}? It was due on Monday"
    status, body = server.call("POST", "/agents/writer/messages", {"message": first})
    assert status == 200, (status, body, server.output())
    sid = body["sessionId"]
    open_playground(page, server, "?agent=writer")
    item = by_id(page, "session-item", sid, "data-session-id")
    title = f"Where is my parcel P-{size[0]}? It was due on Monday"
    expect(item.get_by_test_id("session-title")).to_have_text(title)
    expect(item.get_by_test_id("session-short-id")).to_have_text(sid[:12] + "…")
    item.click()
    expect(page.locator("#chat-title")).to_have_text(title)
    no_sideways_scroll(page)


@SIZES
def test_a_model_written_title_is_listed_and_heads_the_chat(
    page: Any, tmp_path: Path, size: tuple[int, int]
) -> None:
    """With `[titles]` (a scripted title model), the list and the chat heading show the
    model's title, not the first message (`runtime.titling`; served in this process, so the
    test awaits the title on the server's loop)."""
    from playwright.sync_api import expect

    script = tmp_path / "titles.yaml"
    script.write_text(f"replies:\n  - text: Parcel P-{size[0]} on its way\n")
    with serving(tmp_path / "shop", f'[titles]\nmodel = "scripted:{script}"\n') as live:
        sid = sent(live, f"where is my parcel P-{size[0]}? It was due on Monday")
        settled(live)
        open_playground(page, live, "?agent=shop")
        item = by_id(page, "session-item", sid, "data-session-id")
        title = f"Parcel P-{size[0]} on its way"
        expect(item.get_by_test_id("session-title")).to_have_text(title)
        item.click()
        expect(page.locator("#chat-title")).to_have_text(title)
        no_sideways_scroll(page)
        shot(page, "playground-model-title")


def duration(ms: int | None) -> str:
    """As the page shows a duration."""
    if ms is None:
        return "not finished"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


@SIZES
def test_the_trace_view_shows_each_steps_duration_tokens_and_cost(
    page: Any, server: Server, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    status, body = server.call("POST", "/agents/tracer/messages", {"message": "weigh P-7"})
    assert status == 200, (status, body, server.output())
    sid = body["sessionId"]
    status, trace = server.call("GET", f"/agents/tracer/sessions/{sid}/trace")
    assert status == 200, trace
    steps = trace["steps"]
    assert [(s["turn"], s["step"]) for s in steps] == [(1, 1), (1, 2)]
    assert [(s["inputTokens"], s["outputTokens"], s["cost"]) for s in steps] == [
        (120, 30, 0.0123),
        (200, 12, 0.0021),
    ]
    assert [(c["tool"], c["status"]) for c in steps[0]["tools"]] == [("weigh", "Approved.")]
    assert all(isinstance(s["durationMs"], int) for s in steps)

    open_playground(page, server, f"?agent=tracer&session={sid}")
    page.get_by_test_id("tab-trace").click()
    view = page.get_by_test_id("trace-view")
    shown = view.get_by_test_id("trace-step")
    expect(shown).to_have_count(2)
    expect(shown.get_by_test_id("trace-duration")).to_have_text(
        [duration(s["durationMs"]) for s in steps]
    )
    expect(shown.get_by_test_id("trace-tokens")).to_have_text(
        ["120 in · 30 out", "200 in · 12 out"]
    )
    expect(shown.get_by_test_id("trace-cost")).to_have_text(["$0.0123", "$0.0021"])
    call = shown.first.locator('[data-testid=trace-tool][data-tool="weigh"]')
    expect(call.get_by_test_id("trace-tool-duration")).to_have_text(
        duration(steps[0]["tools"][0]["durationMs"])
    )
    total = duration(trace["totals"]["durationMs"])
    expect(view.get_by_test_id("trace-totals")).to_have_text(
        f"2 steps · {total} · 320 in · 42 out tokens · $0.0144"
    )
    expect(page.get_by_test_id("chat-view")).to_be_hidden()
    no_sideways_scroll(page)
    shot(page, "playground-trace")


def scroll_areas_around(locator: Any) -> list[str]:
    """The ancestors of an element that scroll their own overflowing content."""
    return list(
        locator.evaluate(
            """el => {
              const found = [];
              for (let n = el.parentElement; n && n !== document.body; n = n.parentElement) {
                const style = getComputedStyle(n);
                const scrolls = /(auto|scroll)/.test(style.overflowY + style.overflowX);
                if (scrolls && (n.scrollHeight > n.clientHeight || n.scrollWidth > n.clientWidth))
                  found.push(n.id || n.className || n.tagName);
              }
              return found;
            }"""
        )
    )


@pytest.mark.parametrize("size", [PHONE], ids=["phone"])
def test_an_approval_is_decided_from_the_phone_layout(
    page: Any, server: Server, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=shop")
    send(page, "Please refund order A-1")
    card = page.locator('[data-testid=pending-card][data-type="approval"]')
    expect(card).to_have_count(1)
    approve = card.get_by_test_id("approve-button")
    deny = card.get_by_test_id("deny-button")
    for button in (approve, deny):
        button.scroll_into_view_if_needed()
        expect(button).to_be_in_viewport()
        box = button.bounding_box()
        assert box["height"] >= 44 and box["x"] >= 0 and box["x"] + box["width"] <= size[0], box
        assert scroll_areas_around(button) == []
    no_sideways_scroll(page)
    shot(page, "playground-approval")

    approve.click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("Refund issued")
    compact = page.get_by_test_id("compact-button")
    expect(compact).to_be_visible()
    box = compact.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= size[0], box
    no_sideways_scroll(page)


@SIZES
def test_the_approval_link_page_is_styled_for_a_phone_and_decides(
    page: Any, server: Server, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    item = paused_by_api(server)
    token = mint("default", item["id"], time.time() + 600, LINK_SECRET)
    page.goto(f"{server.url}/links/{token}")
    expect(page.locator("h1")).to_have_text("Approve a tool call?")
    expect(page.locator("#tool")).to_have_text("refund")
    approve, deny = page.locator("#approve"), page.locator("#deny")
    for button in (approve, deny):
        box = button.bounding_box()
        assert box["height"] >= 48, box
        if size == PHONE:  # one full-width column
            assert box["width"] >= size[0] * 0.7, box
    assert (
        float(page.locator("body").evaluate("b => parseFloat(getComputedStyle(b).fontSize)")) >= 16
    )
    no_sideways_scroll(page)
    shot(page, "approval-link")
    approve.click()
    expect(page.locator("#outcome")).to_have_text("Approved. The run goes on.")
    status, body = server.call("GET", f"/agents/shop/sessions/{item['sessionId']}")
    assert status == 200 and not body["pending"], body
