"""The web playground in a real browser: headless Debian Chromium (`/usr/bin/chromium`, driven by
Playwright) against `loopwright serve` running in a subprocess on a project whose agent speaks
from a script. A person picks the agent, chats, watches the answer stream, decides pending items
(also ones raised while no page was open), continues a session and reads the configuration.

Skipped only when Chromium is missing and CI is not set; under CI it must run (`scripts/test`
installs Debian's chromium). The last page of the first test is saved as
`tests/artifacts/playground.png`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reaper import Reaper

CHROMIUM = Path("/usr/bin/chromium")
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
ARTIFACTS = Path(__file__).parent / "artifacts"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (/usr/bin/chromium); scripts/test installs it",
)

FIRST = "Let me refund order A-1 for you."
FINAL = "Refund issued: your money is on its way back."
AGAIN = "Glad to help again!"
SHOP = {
    "agent.yaml": """\
description: Refunds orders; a human approves each refund.
instructions: You refund orders for a small shop. Be brief.
model: scripted:script.yaml
max_turns: 5
""",
    "script.yaml": f"""\
replies:
  - text: "{FIRST}"
    tool_calls:
      - {{name: refund, args: {{order: A-1, amount: 5}}}}
    chunk: 4
    delay: 0.01
  - text: "{FINAL}"
    chunk: 4
    delay: 0.01
  - text: "{AGAIN}"
""",
    "tools.py": '''\
from loopwright import tool


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
  - name: refunds-need-approval
    tool: refund
    decision: ask
""",
}
GREETER = {
    "agent.yaml": "description: Says hello.\nmodel: scripted:script.yaml\n",
    "script.yaml": "replies:\n  - Hello!\n",
}
CUT = "It was the best of times, it was the"
CUTTER = {
    "agent.yaml": "description: Talks past its output limit.\nmodel: scripted:script.yaml\n",
    "script.yaml": f'replies:\n  - {{text: "{CUT}", stop_reason: max_tokens, chunk: 8}}\n',
}
ASKER = {
    "agent.yaml": "description: Asks first.\nmodel: scripted:script.yaml\nbuiltins: [ask_user]\n",
    "script.yaml": """\
replies:
  - tool_calls:
      - {name: ask_user, args: {question: "Which colour?", options: [red, blue]}}
  - text: Blue it is.
""",
    "rules.yaml": "default_decision: deny\nrules:\n  - {name: ask, tool: ask_user, decision: allow}\n",
}
BOSS = {
    "agent.yaml": "description: Delegates refunds to its clerk.\nmodel: scripted:script.yaml\n",
    "script.yaml": """\
replies:
  - tool_calls: [{name: clerk, args: {request: refund A-1}}]
  - text: The clerk is done.
""",
    "rules.yaml": "default_decision: allow\nrules: []\n",
    "subagents/clerk/agent.yaml": "description: Refunds orders.\nmodel: scripted:script.yaml\n",
    "subagents/clerk/script.yaml": SHOP["script.yaml"],
    "subagents/clerk/tools.py": SHOP["tools.py"],
    "subagents/clerk/rules.yaml": SHOP["rules.yaml"],
}
SLOW = {  # says a few words, then thinks until its run is cancelled
    "agent.py": """\
import asyncio
from loopwright import Agent
from loopwright.events import TextDelta

class Ponders:
    name = "ponders"
    async def stream(self, request):
        yield TextDelta(delta="Thinking it over")
        await asyncio.Event().wait()

agent = Agent(name="slow", description="Takes its time.", model=Ponders())
""",
}


# --- the server and the browser --------------------------------------------------------------


def write_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "loopwright.toml").write_text("# a project for the playground's browser test\n")
    for name, files in {
        "shop": SHOP,
        "assistant": GREETER,
        "asker": ASKER,
        "slow": SLOW,
        "boss": BOSS,
        "cutter": CUTTER,
    }.items():
        folder = root / "agents" / name
        folder.mkdir(parents=True)
        for file, text in files.items():
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).write_text(text)
    return root


class Server:
    """`loopwright serve` in its own process group, and a tiny JSON client for it."""

    def __init__(self, project: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
        self.process = subprocess.Popen(
            [LOOPWRIGHT, "serve", "--project", str(project), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.reaper = Reaper(self.process)  # (it stops with the tests, should they die first)
        self.url = ""
        self.lines: list[str] = []  # its output
        self.reader = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        assert self.process.stdout is not None
        self.lines += (raw.decode(errors="replace") for raw in self.process.stdout)

    def wait_serving(self) -> None:
        """Read the server's output up to its `playground: URL` line (it listens from then:
        connections wait for the app)."""
        assert self.process.stdout is not None
        # a safety net: a server silent for a minute is killed, and the test fails
        watchdog = threading.Timer(60, os.killpg, (self.process.pid, signal.SIGKILL))
        watchdog.start()
        try:
            for raw in self.process.stdout:
                self.lines.append(line := raw.decode(errors="replace"))
                if found := re.match(r"playground: (http://\S+)/playground$", line.strip()):
                    self.url = found[1]
                    self.reader.start()  # the rest of its output, as it comes
                    return
        finally:
            watchdog.cancel()
        pytest.fail(f"loopwright serve exited ({self.process.wait()}):\n{''.join(self.lines)}")

    def output(self) -> str:
        return "".join(self.lines)[-4000:]

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.reaper.stop()
        if self.reader.is_alive():
            self.reader.join()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    project = write_project(tmp_path_factory.mktemp("playground") / "project")
    running = Server(project)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("CI is set but /usr/bin/chromium is missing: scripts/test installs it")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a safety net: expectations wait for events
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    """A fresh page; JavaScript errors on it, or a request for something missing (404), fail
    the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda m: errors.append(m.text) if "404" in m.text else None)
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"errors on the page: {errors}\nserver log:\n{server.output()}"


def open_playground(page: Any, server: Server, query: str = "") -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/playground{query}")
    expect(page.locator("body[data-ready=true]")).to_have_count(1)


def paused_by_api(server: Server) -> dict[str, Any]:
    """A run started over plain HTTP that pauses on the refund's approval (no page open)."""
    status, body = server.call("POST", "/agents/shop/messages", {"message": "refund A-1"})
    assert status == 202, (status, body, server.output())
    assert body["pending"] is True and body["type"] == "approval", body
    return dict(body)


def by_id(page: Any, testid: str, value: str, attribute: str) -> Any:
    return page.locator(f'[data-testid="{testid}"][{attribute}="{value}"]')


# --- the tests -------------------------------------------------------------------------------


def test_chat_streams_the_answer_and_an_approval_from_the_page_finishes_the_run(
    page: Any, server: Server
) -> None:
    from playwright.sync_api import expect

    open_playground(page, server)
    page.get_by_test_id("agent-select").select_option("shop")
    page.get_by_test_id("message-input").fill("Please refund order A-1")
    page.get_by_test_id("send-button").click()

    said = page.get_by_test_id("msg-user").get_by_test_id("msg-text")
    expect(said).to_have_text(["Please refund order A-1"])
    expect(page.get_by_test_id("msg-assistant").first).to_contain_text(FIRST)
    deltas = page.locator('[data-testid=timeline-item][data-type="text:delta"]')
    expect(deltas.first).to_be_visible()  # the answer arrived as token deltas
    card = page.locator('[data-testid=pending-card][data-type="approval"]')
    expect(card).to_have_count(1)
    expect(card).to_contain_text("refund")
    expect(card.get_by_test_id("pending-args")).to_contain_text('"amount": 5')
    tool = page.get_by_test_id("tool-card")
    expect(tool).to_have_attribute("data-status", "waiting")

    card.get_by_test_id("approve-button").click()

    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text(FINAL)
    expect(tool).to_have_attribute("data-status", "done")
    expect(tool.get_by_test_id("tool-output")).to_have_text("refunded 5.0 on A-1")
    expect(page.get_by_test_id("pending-panel")).to_be_hidden()
    timeline = page.get_by_test_id("timeline-item")
    expect(timeline.last).to_have_attribute("data-type", "done")
    types = timeline.evaluate_all("items => items.map(i => i.dataset.type)")
    # the page held its stream: the run waited for the decision and went on in it (no pause)
    expected = ["approval:pending", "pending:decided", "approval:resolved", "loop:done", "done"]
    assert [t for t in types if t in expected] == expected, types
    assert types.count("session") == 1 and "loop:paused" not in types, types
    decided = page.locator('[data-testid=timeline-item][data-type="pending:decided"]')
    expect(decided).to_contain_text("approved by loopback")
    session_id = page.get_by_test_id("session-id").get_attribute("data-session-id")
    expect(by_id(page, "session-item", session_id, "data-session-id")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)


def test_an_item_raised_with_no_page_open_is_shown_and_approved_from_the_page(
    page: Any, server: Server
) -> None:
    from playwright.sync_api import expect

    item = paused_by_api(server)
    open_playground(page, server)

    card = by_id(page, "pending-card", item["id"], "data-pending-id")
    expect(card).to_contain_text("refund")
    expect(card).to_have_attribute("data-session-id", item["sessionId"])
    card.get_by_test_id("approve-button").click()

    expect(page.get_by_test_id("session-id")).to_have_attribute(
        "data-session-id", item["sessionId"]
    )
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text(FINAL)
    expect(card).to_have_count(0)
    status, body = server.call("GET", f"/agents/shop/sessions/{item['sessionId']}")
    assert status == 200 and not body["pending"], body


def test_edited_arguments_are_checked_inline_and_then_approved(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    item = paused_by_api(server)
    open_playground(page, server)
    card = by_id(page, "pending-card", item["id"], "data-pending-id")
    card.get_by_test_id("edit-button").click()
    editor = card.get_by_test_id("edit-args")
    assert json.loads(editor.input_value()) == {"order": "A-1", "amount": 5}
    error = card.get_by_test_id("pending-error")

    editor.fill('{"order": "A-1", amount: }')
    card.get_by_test_id("edit-submit").click()
    expect(error).to_contain_text("Invalid JSON")

    editor.fill('{"order": "A-1", "amount": "lots"}')  # valid JSON, but not the tool's schema
    card.get_by_test_id("edit-submit").click()
    expect(error).to_be_visible()
    expect(error).not_to_contain_text("Invalid JSON")  # the server's 400 said why
    expect(card).to_have_count(1)  # the item stays open
    status, body = server.call("GET", "/pending")
    assert status == 200 and item["id"] in [i["id"] for i in body["items"]], body

    editor.fill('{"order": "A-1", "amount": 3}')
    card.get_by_test_id("edit-submit").click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    expect(page.get_by_test_id("tool-output").last).to_have_text("refunded 3.0 on A-1")


def test_a_denial_with_a_reason_stops_the_run(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    item = paused_by_api(server)
    open_playground(page, server, f"?agent=shop&session={item['sessionId']}")
    card = by_id(page, "pending-card", item["id"], "data-pending-id")
    card.get_by_test_id("deny-reason").fill("not without a receipt")
    card.get_by_test_id("deny-button").click()

    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "denied")
    expect(page.get_by_test_id("tool-card").last).to_have_attribute("data-status", "denied")
    resolved = page.locator('[data-testid=timeline-item][data-type="approval:resolved"]')
    expect(resolved).to_contain_text("not without a receipt")


def test_a_session_is_continued_from_the_sessions_pane(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    item = paused_by_api(server)
    status, _ = server.call("POST", f"/approvals/{item['id']}/approve", {})
    assert status == 200, server.output()
    open_playground(page, server, "?agent=shop")
    by_id(page, "session-item", item["sessionId"], "data-session-id").click()

    # the conversation is rebuilt from the session's events
    expect(page.get_by_test_id("msg-user")).to_have_count(1)
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text(FINAL)
    expect(page.get_by_test_id("tool-card")).to_have_attribute("data-status", "done")

    page.get_by_test_id("message-input").fill("thanks")
    page.get_by_test_id("message-input").press("Enter")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text(AGAIN)
    expect(page.get_by_test_id("session-id")).to_have_attribute(
        "data-session-id", item["sessionId"]
    )
    assert f"session={item['sessionId']}" in page.url


def test_the_configuration_tab_shows_the_resolved_agent(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=shop")
    page.get_by_test_id("tab-config").click()
    view = page.get_by_test_id("config-view")
    expect(view.get_by_test_id("config-prompt")).to_contain_text("You refund orders")
    expect(view.get_by_test_id("config-overview")).to_contain_text("scripted:")
    tool = view.locator('[data-testid=config-tool][data-tool-name="refund"]')
    tool.locator("summary").click()
    expect(tool).to_contain_text('"amount"')
    expect(view.get_by_test_id("config-rules")).to_contain_text("refunds-need-approval")
    expect(page.get_by_test_id("chat-view")).to_be_hidden()


def test_a_question_is_answered_with_an_option_button(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    status, item = server.call("POST", "/agents/asker/messages", {"message": "paint it"})
    assert status == 202 and item["type"] == "question", (status, item)
    open_playground(page, server, "?agent=asker")
    card = by_id(page, "pending-card", item["id"], "data-pending-id")
    expect(card.get_by_test_id("pending-question")).to_have_text("Which colour?")
    expect(card.get_by_test_id("answer-option")).to_have_text(["red", "blue"])
    card.get_by_test_id("answer-option").filter(has_text="blue").click()

    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("Blue it is.")
    answered = page.locator('[data-testid=timeline-item][data-type="question:resolved"]')
    expect(answered).to_contain_text("blue")


def test_a_running_run_is_cancelled_from_the_page(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=slow")
    page.get_by_test_id("message-input").fill("take your time")
    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("msg-assistant")).to_contain_text("Thi")
    page.get_by_test_id("cancel-button").click()

    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "aborted")
    expect(page.get_by_test_id("cancel-button")).to_be_hidden()
    expect(page.get_by_test_id("timeline-item").last).to_have_attribute("data-type", "done")
    aborted = page.locator('[data-testid=timeline-item][data-type="loop:aborted"]')
    expect(aborted).to_have_count(1)


def test_a_subagents_events_and_approval_appear_nested_in_its_parents_chat(
    page: Any, server: Server
) -> None:
    from playwright.sync_api import expect

    open_playground(page, server, "?agent=boss")
    page.get_by_test_id("message-input").fill("refund A-1")
    page.get_by_test_id("send-button").click()
    clerk = page.locator('[data-testid=tool-card][data-tool="clerk"]')
    refund = clerk.locator('[data-testid=tool-card][data-tool="refund"]')
    expect(refund).to_contain_text("clerk")  # tagged with the child agent's name
    expect(clerk.get_by_test_id("msg-assistant")).to_contain_text(FIRST)
    session_id = page.get_by_test_id("session-id").get_attribute("data-session-id")
    card = by_id(page, "pending-card", session_id, "data-session-id")
    expect(card).to_contain_text("clerk")

    # decided from a page opened afresh: it finds the parent's session and shows it going on
    open_playground(page, server)
    card.get_by_test_id("approve-button").click()
    expect(page.get_by_test_id("agent-select")).to_have_value("boss")
    expect(page.get_by_test_id("session-id")).to_have_attribute("data-session-id", session_id)
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "completed")
    expect(refund).to_have_attribute("data-status", "done")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text("The clerk is done.")
    nested = page.locator('[data-testid=timeline-item][data-type="subagent:event"]')
    expect(nested.first).to_contain_text("clerk")


def test_a_cut_answer_shows_its_text_and_the_max_tokens_badge(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    open_playground(page, server)
    page.get_by_test_id("agent-select").select_option("cutter")
    page.get_by_test_id("message-input").fill("Tell me a long story")
    page.get_by_test_id("send-button").click()

    status = page.get_by_test_id("run-status")
    expect(status).to_have_attribute("data-state", "max_tokens")
    expect(status).to_have_text("stopped: the answer was cut by the output limit")
    expect(page.get_by_test_id("msg-assistant").last).to_contain_text(CUT)
    stop = page.get_by_test_id("run-stop").last
    expect(stop).to_have_attribute("data-stop-reason", "max_tokens")
    expect(stop.locator(".stop-text")).to_have_count(0)  # the text is the answer, not a reason
    truncated = page.locator('[data-testid=timeline-item][data-type="message:truncated"]')
    expect(truncated).to_have_count(1)
