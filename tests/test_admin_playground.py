"""The playground's admin view (issue 35 row 2, docs/admin.md) in a real browser (headless
Chromium driven by Playwright) against `loopwright serve` with an admin token and a plain one:
the admin creates an agent, writes its rules with a typo and sees the loader's error with the
line marked, fixes it, and the new rule is served at once (GET /agents/NAME/config); at a
desktop's size and a phone's, without sideways scrolling. A token without the admin role sees
no admin view.

Screenshots are saved under `$LOOPWRIGHT_SHOTS` (default tests/artifacts/shots)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright.cli.new import scaffold
from test_playground_browser import Server, browser, open_playground
from test_playground_layout import SIZES, no_sideways_scroll, shot

__all__ = ["browser"]  # the fixture, used by name

ADMIN = "admin-token-0123456789"
USER = "user-token-0123456789ab"
TOML = """\
[[auth.token]]
env = "LW_TEST_ADMIN"
tenant = "acme"
name = "ops-alice"
roles = ["admin"]

[[auth.token]]
env = "LW_TEST_USER"
tenant = "acme"
"""
TYPO = """\
default_decision: deny
rules:
  - name: echo-ok
    tool: echo
    decison: allow
"""


class AdminServer(Server):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.root = root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminServer]:
    root = tmp_path_factory.mktemp("admin") / "project"
    root.mkdir()
    (root / "loopwright.toml").write_text(TOML)
    scaffold(root, "example", "An example.", {})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LW_TEST_ADMIN", ADMIN)
        env.setenv("LW_TEST_USER", USER)
        running = AdminServer(root)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


@pytest.fixture
def page(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page of the test's `size`; a JavaScript error on it fails the test, and so does
    a console error other than Chromium's note of a 401 (the page before it has a token) or of
    an admin route's 4xx (a 403 for a plain token, the 422 of a file that does not load:
    answers the page shows)."""
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
    refused = "Failed to load resource: the server responded with a status of "
    return message.type == "error" and not (
        (message.text.startswith(refused + "4") and "/admin/agents" in message.location["url"])
        or message.text.startswith(refused + "401")  # (the page before a token is given)
    )


def use_token(page: Any, token: str) -> None:
    """Type the token into the page's token box, as a person does."""
    if not page.locator("#token-box").evaluate("box => box.open"):
        page.locator("#token-box summary").click()
    page.get_by_test_id("token-input").fill(token)
    page.get_by_test_id("token-save").click()


def config(server: Server, name: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{server.url}/agents/{name}/config",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@SIZES
def test_an_admin_creates_an_agent_and_fixes_a_rules_typo_shown_by_line(
    page: Any, server: AdminServer, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    name = f"desk-{size[0]}"
    open_playground(page, server)
    expect(page.get_by_test_id("tab-admin")).to_be_hidden()  # no token: nobody is an admin
    use_token(page, ADMIN)
    expect(page.get_by_test_id("tab-admin")).to_be_visible()
    page.get_by_test_id("tab-admin").click()
    view = page.get_by_test_id("admin-view")
    expect(view).to_be_visible()
    expect(page.get_by_test_id("chat-view")).to_be_hidden()
    expect(page.locator('[data-testid=admin-agent-item][data-agent="example"]')).to_contain_text(
        "agent.yaml, rules.yaml"
    )

    # a mistake in the form comes back as the server's words
    page.get_by_test_id("admin-new-name").fill("Desk Two")
    page.get_by_test_id("admin-create-button").click()
    expect(page.get_by_test_id("admin-create-status")).to_have_text(
        "name must be lowercase words joined by hyphens, like 'order-desk'"
    )

    page.get_by_test_id("admin-new-name").fill(name)
    page.get_by_test_id("admin-new-model").fill("scripted:script.yaml")
    page.get_by_test_id("admin-new-prompt").fill("Answer in one line.")
    page.get_by_test_id("admin-create-button").click()
    expect(page.get_by_test_id("admin-create-status")).to_have_text(
        f"Created {name}: it is served now."
    )
    # the new agent is listed, picked in the editor and offered in the chat's agent picker
    expect(page.locator(f'[data-testid=admin-agent-item][data-agent="{name}"]')).to_contain_text(
        "agent.yaml, prompt.md, rules.yaml"
    )
    expect(page.get_by_test_id("admin-agent")).to_have_value(name)
    expect(page.locator(f'#agent-select option[value="{name}"]')).to_have_count(1)
    assert config(server, name)["systemPrompt"] == "Answer in one line.\n"

    page.get_by_test_id("admin-file").select_option("rules.yaml")
    text = page.get_by_test_id("admin-text")
    rules = server.root / "agents" / name / "rules.yaml"
    before = rules.read_text()
    assert "name: echo-freely" in before
    expect(text).to_have_value(before)  # the file as on disk

    text.fill(TYPO)
    page.get_by_test_id("admin-save").click()
    error = page.get_by_test_id("admin-error")
    expect(page.get_by_test_id("admin-error-text")).to_have_text(
        "rules.yaml:5: unknown key 'decison' in a rule"
    )
    expect(error).to_have_attribute("data-file", "rules.yaml")
    expect(error).to_have_attribute("data-line", "5")
    expect(page.get_by_test_id("admin-error-lines")).to_have_text(
        "3 │   - name: echo-ok\n4 │     tool: echo\n5 │     decison: allow\n"
    )
    expect(page.get_by_test_id("admin-error-line")).to_have_text("5 │     decison: allow\n")
    expect(text).to_have_attribute("aria-invalid", "true")
    selected = text.evaluate("t => t.value.slice(t.selectionStart, t.selectionEnd)")
    assert selected == "    decison: allow"  # the line is selected in the editor
    assert rules.read_text() == before  # nothing written
    no_sideways_scroll(page)
    shot(page, "playground-admin-error")

    text.fill(TYPO.replace("decison", "decision"))
    page.get_by_test_id("admin-save").click()
    expect(page.get_by_test_id("admin-status")).to_have_text(
        f"Saved rules.yaml: {name} is served with it now."
    )
    expect(error).to_be_hidden()
    expect(text).not_to_have_attribute("aria-invalid", "true")
    assert rules.read_text() == TYPO.replace("decison", "decision")
    permissions = config(server, name)["permissions"]
    assert permissions["defaultDecision"] == "deny"
    assert [(r["name"], r["tool"], r["decision"]) for r in permissions["rules"]] == [
        ("echo-ok", "echo", "allow")
    ]
    no_sideways_scroll(page)
    shot(page, "playground-admin")

    # the page's own configuration view shows the rule served now
    page.get_by_test_id("admin-open-config").click()
    expect(page.get_by_test_id("config-view")).to_be_visible()
    expect(page.get_by_test_id("agent-select")).to_have_value(name)
    expect(page.get_by_test_id("config-rule")).to_have_count(1)
    expect(page.get_by_test_id("config-rule")).to_contain_text("echo-ok")

    # a skill of its own, then the list shows it
    page.get_by_test_id("tab-admin").click()
    page.get_by_test_id("admin-file").select_option("new-skill")
    page.get_by_test_id("admin-skill").fill("tidy")
    text.fill("---\nname: tidy\ndescription: Tidy a desk.\n---\n\nPut things away.\n")
    page.get_by_test_id("admin-save").click()
    expect(page.get_by_test_id("admin-status")).to_have_text(
        f"Saved skills/tidy/SKILL.md: {name} is served with it now."
    )
    expect(page.get_by_test_id("admin-file")).to_have_value("skills/tidy/SKILL.md")
    assert [s["name"] for s in config(server, name)["skills"]] == ["tidy"]


@SIZES
def test_a_token_without_the_admin_role_sees_no_admin_view(
    page: Any, server: Server, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    open_playground(page, server)
    use_token(page, ADMIN)
    page.get_by_test_id("tab-admin").click()
    expect(page.get_by_test_id("admin-view")).to_be_visible()

    with page.expect_response(lambda r: r.url.endswith("/admin/agents")) as asked:
        use_token(page, USER)
    assert asked.value.status == 403
    expect(page.get_by_test_id("tab-admin")).to_be_hidden()
    expect(page.get_by_test_id("admin-view")).to_be_hidden()
    expect(page.get_by_test_id("chat-view")).to_be_visible()
    expect(page.locator('#agent-select option[value="example"]')).to_have_count(1)

    # a page opened afresh with the plain token asks once, is refused, and shows no admin view
    with page.expect_response(lambda r: r.url.endswith("/admin/agents")) as again:
        open_playground(page, server)
    assert again.value.status == 403
    expect(page.get_by_test_id("tab-admin")).to_be_hidden()
    assert page.get_by_test_id("admin-view").is_hidden()
    no_sideways_scroll(page)
