"""`GET /notifications` keeps tenants and webhook URLs apart (docs/notify.md): a served project
with two tenants and an unnamed webhook whose URL carries its credentials (user and password, a
`?token=`, a Slack-style secret path) on a real receiver on 127.0.0.1. Each tenant lists only
its own deliveries, and the webhook only as its origin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from live_server import serving
from loopwright.notify.config import public_name
from notify_receiver import Receiver

SECRET = "whsec-listing-0123456789"
ACME, GLOBEX = "acme-token-0123456789", "globex-token-9876543210"
PATH, TOKEN, PASSWORD = "/services/T000/B000/XXXXsecretpath", "tok-0123456789", "pw-0123456789"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as running:
        yield running


def test_each_tenant_lists_only_its_deliveries_and_never_a_webhooks_url(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    origin = receiver.url.removesuffix("/hook")
    url = origin.replace("://", f"://hooks:{PASSWORD}@") + f"{PATH}?token={TOKEN}"
    toml = f"""
[auth.tokens]
"{ACME}" = "acme"
"{GLOBEX}" = "globex"

[[notify.webhook]]
url = "{url}"
secret_env = "TEST_HOOK_SECRET"
events = ["approval"]
"""
    with serving(tmp_path / "shop", toml) as live:
        items = {}
        for tenant, token in (("acme", ACME), ("globex", GLOBEX)):
            with live.client(headers={"Authorization": f"Bearer {token}"}) as http:
                paused = http.post("/agents/shop/messages", json={"message": "refund A-1"})
                assert paused.status_code == 202, paused.text
                items[tenant] = paused.json()["id"]
        got = receiver.wait(2)
        listings = {}
        for tenant, token in (("acme", ACME), ("globex", GLOBEX)):
            with live.client(headers={"Authorization": f"Bearer {token}"}) as http:
                listings[tenant] = http.get("/notifications")
    assert sorted((g.path, g.body["tenant"], g.body["id"]) for g in got) == sorted(
        (f"{PATH}?token={TOKEN}", tenant, item) for tenant, item in items.items()
    )  # (the receiver was posted to at its whole URL)
    for tenant, answer in listings.items():
        assert answer.status_code == 200
        assert [(d["item"], d["event"], d["target"]) for d in answer.json()["deliveries"]] == [
            (items[tenant], "pending", f"{origin}/…")
        ]
        for secret in (PATH, TOKEN, PASSWORD, "hooks:"):
            assert secret not in answer.text


def test_a_url_is_shown_as_its_origin_only() -> None:
    assert public_name("https://u:p@hooks.example.com:8443/a/b?token=x#f") == (
        "https://hooks.example.com:8443/…"
    )
    assert public_name("http://[::1]:9/x") == "http://[::1]:9/…"
    assert public_name("https://hooks.slack.com/services/T/B/secret") == "https://hooks.slack.com/…"
    for name in ("ops", "pager", "ops: https", "ftp://host/path"):
        assert public_name(name) == name
