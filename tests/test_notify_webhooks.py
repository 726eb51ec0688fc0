"""Webhooks for pending items (docs/notify.md): the delivery worker (`notify.Deliverer`) driven
round by round with a clock the test moves, posting to a real receiver on 127.0.0.1 that checks
every signature. What a webhook is told, exactly; retries with backoff and jitter; giving up;
several webhooks and their `events`; the configuration's errors."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from log_conformance import KEY, Clock, approval, reply, said
from loopwright import events as ev
from loopwright import redact
from loopwright.errors import ConfigError
from loopwright.notify import Deliverer, Links, NotifySettings, Sent, Webhook, WebhookNotifier
from loopwright.notify.signing import LinkClaim, check, verify
from loopwright.runtime import Runtime
from loopwright.store.log import EventLog, Verdict
from loopwright.store.outbox import Attempt, outbox_of
from loopwright.store.sqlite_log import SQLiteLog
from notify_receiver import Receiver

SECRET = "whsec-0123456789abcdef"
LINK_KEY = "link-key-0123456789abcdef"
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
SENT_AT = "2027-01-15T08:00:00.000Z"
ALL = frozenset({"approval", "question", "resolved"})


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as running:
        yield running


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SQLiteLog]:
    opened = SQLiteLog(tmp_path / "loopwright.db", clock=Clock(NOW))
    yield opened
    await opened.close()


def question(pending_id: str) -> ev.QuestionPending:
    return ev.QuestionPending(
        id=pending_id,
        agent="support",
        question="Which colour?",
        options=["red", "blue"],
        requested_at="t0",
    )


async def paused(log: EventLog, *asks: ev.Event) -> None:
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.append(lease, [said("refund"), reply(), *asks])


def deliverer(log: EventLog, clock: Clock, *hooks: Webhook, **options: Any) -> Deliverer:
    links = Links("https://agents.example.com", LINK_KEY, 3600, clock)
    settings = NotifySettings(webhooks=hooks, **options)
    notifiers = [WebhookNotifier(hook) for hook in hooks]
    return Deliverer(Runtime({}, log), notifiers, settings, links, clock=clock, random=lambda: 0.5)


def hook(receiver: Receiver, name: str = "ops", events: frozenset[str] = ALL) -> Webhook:
    return Webhook(name, receiver.url, SECRET, events)


async def test_a_pending_approval_is_posted_signed_with_its_links(
    log: SQLiteLog, receiver: Receiver
) -> None:
    redact.register("sk-live-0123456789")
    await paused(log, approval("p-1", order="A-1", card="sk-live-0123456789"))
    clock = Clock(NOW)
    worker = deliverer(log, clock, hook(receiver))
    try:
        assert await worker.tick() == 1
    finally:
        await worker.close()
    [got] = receiver.wait(1)
    assert got.signed and got.path == "/hook"
    assert got.headers["Content-Type"] == "application/json"
    assert re.fullmatch(r"sha256=[0-9a-f]{64}", got.headers["X-Loopwright-Signature"])
    body = got.body
    links = body.pop("links")
    delivery_id = body.pop("deliveryId")
    assert got.headers["X-Loopwright-Delivery"] == delivery_id
    assert body == {
        "sentAt": SENT_AT,
        "attempt": 1,
        "event": "pending",
        "id": "p-1",
        "kind": "approval",
        "tenant": "acme",
        "agent": "support",
        "session": "order-1001",
        "tool": "refund",
        "arguments": {"order": "A-1", "card": "[redacted]"},
        "reason": "refunds need a human",
        "requestedAt": "2026-01-01T00:00:00.000Z",
        "status": "open",
        "decidedBy": None,
        "decidedAt": None,
    }
    page = links["page"]
    assert links == {
        "page": page,
        "approve": f"{page}?action=approve",
        "deny": f"{page}?action=deny",
    }
    token = page.removeprefix("https://agents.example.com/links/")
    assert check(token, LINK_KEY, NOW) == LinkClaim("acme", "p-1", NOW + 3600)
    assert check(token, LINK_KEY, NOW + 3600) == "expired"
    assert check(token, "another-key-0123456789", NOW) == "forged"
    for garbled in ("", ".", "x.y", token + "x", "é." + token, token.replace(".", "é.")):
        assert check(garbled, LINK_KEY, NOW) == "forged"
    assert not verify(got.raw, SECRET, "sha256=é") and verify(
        got.raw, SECRET, got.headers["X-Loopwright-Signature"]
    )
    [listed] = (await outbox_of(log).deliveries("acme")).items
    assert (listed.id, listed.state, listed.tried) == (
        delivery_id,
        "delivered",
        [Attempt(1, SENT_AT, 200, None)],
    )


async def test_failures_are_retried_with_backoff_and_jitter_until_delivered(
    log: SQLiteLog,
) -> None:
    await paused(log, approval("p-1", amount=5))
    clock = Clock(NOW)
    with Receiver(SECRET, [503, 429]) as flaky:
        worker = deliverer(log, clock, hook(flaky))
        try:
            assert await worker.tick() == 1  # 503: again in 2 s * (0.5 + 0.5 / 2) = 1.5 s
            assert await worker.tick() == 0  # not due yet
            clock.advance(1.499)
            assert await worker.tick() == 0
            clock.advance(0.001)
            assert await worker.tick() == 1  # 429: again in 4 s * 0.75 = 3 s
            clock.advance(3)
            assert await worker.tick() == 1  # delivered
            clock.advance(3600)
            assert await worker.tick() == 0  # nothing more, ever
        finally:
            await worker.close()
        got = flaky.wait(3)
    assert all(g.signed for g in got)
    assert len({g.body["deliveryId"] for g in got}) == 1  # one delivery, three attempts
    assert [(g.body["attempt"], g.body["sentAt"][11:23]) for g in got] == [
        (1, "08:00:00.000"),
        (2, "08:00:01.500"),
        (3, "08:00:04.500"),
    ]
    [listed] = (await outbox_of(log).deliveries()).items
    assert (listed.state, listed.attempts, listed.last_status) == ("delivered", 3, 200)
    assert [(a.n, a.status, a.error) for a in listed.tried] == [
        (1, 503, "HTTP 503"),
        (2, 429, "HTTP 429"),
        (3, 200, None),
    ]


async def test_a_refusal_gives_up_and_so_do_too_many_failures(log: SQLiteLog) -> None:
    await paused(log, approval("p-1", amount=5))
    clock = Clock(NOW)
    with Receiver(SECRET, [410]) as gone, Receiver(SECRET, [500] * 5) as down:
        worker = deliverer(log, clock, hook(gone, "gone"), hook(down, "down"), max_attempts=3)
        try:
            assert await worker.tick() == 2
            clock.advance(1.5)
            assert await worker.tick() == 1
            clock.advance(3)
            assert await worker.tick() == 1
            clock.advance(3600)
            assert await worker.tick() == 0
        finally:
            await worker.close()
        assert (len(gone.wait(1)), len(down.wait(3))) == (1, 3)
    listed = {d.target: d for d in (await outbox_of(log).deliveries()).items}
    assert (listed["gone"].state, listed["gone"].attempts) == ("failed", 1)
    assert (listed["down"].state, listed["down"].attempts) == ("failed", 3)


async def test_no_receiver_at_all_is_an_attempt_that_is_tried_again(log: SQLiteLog) -> None:
    await paused(log, approval("p-1", amount=5))
    clock = Clock(NOW)
    with socket.socket() as closed:  # a port nobody listens on (bound, then let go)
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    nowhere = Webhook("nowhere", f"http://127.0.0.1:{port}/hook", SECRET, ALL, timeout=5)
    worker = deliverer(log, clock, nowhere)
    try:
        assert await worker.tick() == 1
    finally:
        await worker.close()
    [listed] = (await outbox_of(log).deliveries()).items
    assert (listed.state, listed.attempts, listed.last_status) == ("due", 1, None)
    assert listed.last_error is not None and listed.last_error.startswith("ConnectError")
    assert listed.due == NOW + 1.5


async def test_several_webhooks_each_get_the_events_they_take(log: SQLiteLog) -> None:
    await paused(log, approval("p-1", amount=5), question("q-1"))
    clock = Clock(NOW)
    with (
        Receiver(SECRET) as everything,
        Receiver(SECRET) as approvals,
        Receiver(SECRET) as resolutions,
    ):
        worker = deliverer(
            log,
            clock,
            hook(everything, "everything"),
            hook(approvals, "approvals", frozenset({"approval"})),
            hook(resolutions, "resolutions", frozenset({"resolved"})),
        )
        try:
            assert await worker.tick() == 3
            await log.decide("acme", "q-1", Verdict("answered", "ann", answer="red"))
            assert await worker.tick() == 2
        finally:
            await worker.close()
        seen = {
            name: [(g.body["event"], g.body["id"], g.signed) for g in receiver.wait(count)]
            for name, receiver, count in (
                ("everything", everything, 3),
                ("approvals", approvals, 1),
                ("resolutions", resolutions, 1),
            )
        }
        answered = resolutions.got[0].body
    assert {k: sorted(v) for k, v in seen.items()} == {
        "everything": [
            ("pending", "p-1", True),
            ("pending", "q-1", True),
            ("resolved", "q-1", True),
        ],
        "approvals": [("pending", "p-1", True)],
        "resolutions": [("resolved", "q-1", True)],
    }
    assert "links" not in answered
    assert {k: answered[k] for k in ("status", "decidedBy", "answer", "kind", "tool")} == {
        "status": "answered",
        "decidedBy": "ann",
        "answer": "red",
        "kind": "question",
        "tool": "ask_user",
    }
    assert {d.target for d in (await outbox_of(log).deliveries()).items} == {
        "everything",
        "approvals",
        "resolutions",
    }  # (the ones a webhook does not take are not listed)


def test_the_configuration_names_what_is_wrong_and_never_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    table = {"notify": {"webhook": {"url": "https://h.example.com/x", "secret_env": "HOOK_SECRET"}}}
    with pytest.raises(ConfigError, match=r"the variable HOOK_SECRET is not set"):
        NotifySettings.from_project(table)
    monkeypatch.setenv("HOOK_SECRET", "s3cret-value-xyz-123")
    one = NotifySettings.from_project(table)
    assert [(w.name, w.url, w.events) for w in one.webhooks] == [
        ("https://h.example.com/x", "https://h.example.com/x", ALL)
    ]
    assert "s3cret" not in repr(one)
    assert redact.text("s3cret-value-xyz-123") == "[redacted]"
    many = {
        "notify": {
            "base_url": "https://agents.example.com/",
            "webhook": [
                {"url": "https://a.example.com", "secret_env": "HOOK_SECRET", "name": "a"},
                {
                    "url": "https://b.example.com",
                    "secret_env": "HOOK_SECRET",
                    "events": ["resolved"],
                },
            ],
        }
    }
    two = NotifySettings.from_project(many)
    assert [(w.name, sorted(w.events)) for w in two.webhooks] == [
        ("a", sorted(ALL)),
        ("https://b.example.com", ["resolved"]),
    ]
    assert two.base_url == "https://agents.example.com"
    bad = [
        ({"webhook": {"url": "ftp://x", "secret_env": "HOOK_SECRET"}}, "must be an http"),
        ({"webhook": {"url": "https://x.example.com"}}, "needs secret_env"),
        (
            {
                "webhook": {
                    "url": "https://x.example.com",
                    "secret_env": "HOOK_SECRET",
                    "events": ["x"],
                }
            },
            "events must be a non-empty list of approval, question, resolved",
        ),
        ({"link_secret_env": "NOT_SET_ANYWHERE_42"}, "the variable NOT_SET_ANYWHERE_42 is not set"),
    ]
    for notify, message in bad:
        with pytest.raises(ConfigError, match=message) as raised:
            NotifySettings.from_project({"notify": notify})
        assert "s3cret" not in str(raised.value)


class Pager:
    """A plugin's notifier (`plugins.Notifier`): it fails once, then takes everything."""

    name = "pager"
    events = frozenset({"approval", "resolved"})

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    async def send(self, message: Mapping[str, Any]) -> Sent:
        self.got.append(dict(message))
        return Sent(len(self.got) > 1, error=None if len(self.got) > 1 else "busy", retry=True)


async def test_a_plugins_notifier_gets_the_same_durable_delivery(log: SQLiteLog) -> None:
    from loopwright.plugins import Notifier

    pager = Pager()
    assert isinstance(pager, Notifier)
    webhook = WebhookNotifier(Webhook("w", "http://127.0.0.1:1/", SECRET, ALL))
    assert isinstance(webhook, Notifier)
    await webhook.close()
    await paused(log, approval("p-1", amount=5))
    clock = Clock(NOW)
    links = Links("https://agents.example.com", LINK_KEY, 3600, clock)
    worker = Deliverer(
        Runtime({}, log), [pager], NotifySettings(), links, clock=clock, random=lambda: 0.5
    )
    assert await worker.tick() == 1
    clock.advance(1.5)
    assert await worker.tick() == 1
    assert [(m["attempt"], m["event"], m["id"]) for m in pager.got] == [
        (1, "pending", "p-1"),
        (2, "pending", "p-1"),
    ]
    [listed] = (await outbox_of(log).deliveries()).items
    assert (listed.target, listed.state, [a.error for a in listed.tried]) == (
        "pager",
        "delivered",
        ["busy", None],
    )


class Leaky:
    """A notifier whose failures quote its credentials: raised once, then returned."""

    name = "leaky"
    events = ALL

    def __init__(self, token: str, password: str) -> None:
        self.token, self.password, self.tries = token, password, 0

    async def send(self, message: Mapping[str, Any]) -> Sent:
        self.tries += 1
        said = f"pager refused token {self.token} (password {self.password}) " + "x" * 480
        if self.tries == 1:
            raise RuntimeError(said)
        return Sent(False, 401, said, retry=True)


async def test_a_notifiers_failure_is_stored_and_listed_without_its_secrets(
    log: SQLiteLog,
) -> None:
    token, password = "xoxb-1234567890-abcdefghijkl", "pager-password-REGISTERED-0001"
    redact.register(password)
    try:
        await paused(log, approval("p-1", amount=5))
        clock = Clock(NOW)
        links = Links("https://agents.example.com", LINK_KEY, 3600, clock)
        leaky = Leaky(token, password)
        worker = Deliverer(
            Runtime({}, log), [leaky], NotifySettings(), links, clock=clock, random=lambda: 0.5
        )
        assert await worker.tick() == 1
        clock.advance(1.5)
        assert await worker.tick() == 1
    finally:
        redact.forget(password)
    [listed] = (await outbox_of(log).deliveries()).items
    said = "pager refused token [redacted] (password [redacted]) "
    assert [a.error for a in listed.tried] == [
        ("RuntimeError: " + said + "x" * 500)[:500],
        (said + "x" * 480)[:500],
    ]
    assert (listed.state, listed.last_error) == ("due", listed.tried[-1].error)


async def test_two_workers_on_one_database_post_each_delivery_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    clock = Clock(NOW)
    logs = [SQLiteLog(tmp_path / "loopwright.db", clock=clock) for _ in range(2)]
    workers = [deliverer(each, clock, hook(receiver)) for each in logs]
    try:
        await paused(logs[0], approval("p-1", amount=5), approval("p-2", amount=6))
        counts = await asyncio.gather(*(w.tick() for w in workers))
        assert sorted(counts) in ([0, 2], [1, 1])  # whoever claimed first posted it
        assert [await w.tick() for w in workers] == [0, 0]
    finally:
        for w in workers:
            await w.close()
        for each in logs:
            await each.close()
    got = receiver.wait(2)
    assert sorted(g.body["id"] for g in got) == ["p-1", "p-2"]


async def test_delivery_from_a_postgresql_log(pg_url: str, receiver: Receiver) -> None:
    from loopwright.store.pg_log import PostgresLog

    clock = Clock(NOW)
    log = await PostgresLog(pg_url, clock=clock).open()
    worker = deliverer(log, clock, hook(receiver))
    try:
        await paused(log, approval("p-1", amount=5))
        assert await worker.tick() == 1
        await log.decide("acme", "p-1", Verdict("denied", "ann", note="no"))
        assert await worker.tick() == 1
    finally:
        await worker.close()
        await log.close()
    got = receiver.wait(2)
    assert [(g.signed, g.body["event"], g.body["status"]) for g in got] == [
        (True, "pending", "open"),
        (True, "resolved", "denied"),
    ]
    assert got[1].body["note"] == "no"


async def test_the_worker_forgets_deliveries_once_kept_long_enough(
    log: SQLiteLog, receiver: Receiver
) -> None:
    await paused(log, approval("p-1", amount=5))
    clock = log.clock  # (the log's: the decision's notice is made at the worker's now)
    assert isinstance(clock, Clock)
    worker = deliverer(log, clock, hook(receiver), keep=86_400.0)
    try:
        assert await worker.tick() == 1
        clock.advance(86_400)  # kept a day (made at NOW: not before NOW + 1 day - 1 day)
        await worker.tick()
        assert [d.state for d in (await outbox_of(log).deliveries()).items] == ["delivered"]
        clock.advance(3600)  # the next pruning, an hour later
        await worker.tick()
        assert (await outbox_of(log).deliveries()).items == []
        assert await outbox_of(log).notices() == (1, 1)  # (the newest notice always stays)
        await log.decide("acme", "p-1", Verdict("approved", "ann"))
        assert await worker.tick() == 1  # a notice after the pruning is fanned out
        assert [d.notice.event for d in (await outbox_of(log).deliveries()).items] == ["resolved"]
    finally:
        await worker.close()


async def test_an_edited_approval_is_told_with_its_arguments(
    log: SQLiteLog, receiver: Receiver
) -> None:
    await paused(log, approval("p-1", amount=5))
    await log.decide("acme", "p-1", Verdict("approved", "ann", edited_args={"amount": 3}))
    clock = Clock(NOW)
    worker = deliverer(log, clock, hook(receiver, events=frozenset({"resolved"})))
    try:
        assert await worker.tick() == 1
    finally:
        await worker.close()
    [got] = receiver.wait(1)
    told = {k: got.body[k] for k in ("event", "status", "arguments", "editedArguments", "note")}
    assert told == {
        "event": "resolved",
        "status": "approved",
        "arguments": {"amount": 5},
        "editedArguments": {"amount": 3},
        "note": None,
    }
