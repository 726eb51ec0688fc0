"""The event-log conformance suite, the read models (`store.read_models`, written once for both
backends): each record and page exactly as stored, filters combined, ties in the keyset order,
and the reads of a session's attachments. Run on both backends by `test_log_conformance.py`
(the `make_log` fixture)."""

from __future__ import annotations

from dataclasses import replace

from log_conformance import KEY, Clock, MakeLog, approval, decide, reply, said
from loopwright import events as ev
from loopwright.attachments import image
from loopwright.messages import Usage, UserMessage
from loopwright.store import PendingRecord
from loopwright.store.log import SessionKey, SessionRecord

T0 = 1_000_000.0
AT0 = "1970-01-12T13:46:40.000Z"  # T0 as the log writes it
CHILD = SessionKey("acme", "billing", "order-1001/billing/call-1")


async def test_a_session_record_is_its_row_as_stored(make_log: MakeLog) -> None:
    """Every field of `session` and `sessions`: while a lease holds it, once released, once its
    lease expired before its `done`; a subagent's names its parent."""
    clock = Clock(T0)
    log = await make_log(clock=clock)
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    clock.advance(2)
    await log.claim(CHILD, "run-1", ttl=30, parent=KEY)
    clock.advance(1.5)
    await log.append(lease, [said("hi"), reply()])
    at = "1970-01-12T13:46:43.500Z"
    running = SessionRecord(KEY, "running", 2, AT0, at, None, "run-1", T0 + 30)
    assert await log.session(KEY) == running
    await log.release(lease, "idle")
    idle = replace(running, status="idle", lease_owner=None, lease_expires=None)
    assert await log.session(KEY) == idle
    clock.advance(40)
    child_at = "1970-01-12T13:46:42.000Z"
    child = SessionRecord(CHILD, "interrupted", 0, child_at, child_at, KEY, "run-1", T0 + 32)
    assert await log.session(CHILD) == child
    page = await log.sessions("acme")
    assert (page.items, page.cursor) == ([idle, child], None)


async def test_tenants_are_those_with_a_session_sorted_once_each(make_log: MakeLog) -> None:
    """`tenants`: every tenant with a session (a subagent's too), each once, in order; none
    before the first session."""
    log = await make_log(clock=Clock(T0))
    assert await log.tenants() == []
    await log.claim(SessionKey("globex", "support", "s-1"), "run", ttl=30)
    lease = (await log.claim(KEY, "run", ttl=30)).lease
    await log.claim(CHILD, "run", ttl=30, parent=KEY)
    await log.claim(SessionKey("acme", "support", "s-2"), "run", ttl=30)
    await log.append(lease, [said("hi")])
    assert await log.tenants() == ["acme", "globex"]


async def test_sessions_updated_at_the_same_time_page_newest_row_first(
    make_log: MakeLog,
) -> None:
    """Ties in `updated_at` are broken by the row, newest first, across pages."""
    log = await make_log(clock=Clock(T0))  # the clock never moves: one updated_at for all
    for n in range(5):
        await log.claim(SessionKey("acme", "support", f"s-{n}"), "run", ttl=30)
    pages, cursor = [], None
    while True:
        page = await log.sessions("acme", "support", limit=2, cursor=cursor)
        pages.append([s.key.id for s in page.items])
        if (cursor := page.cursor) is None:
            break
    assert pages == [["s-4", "s-3"], ["s-2", "s-1"], ["s-0"]]
    assert (await log.sessions("acme", "billing")).items == []


def item(pending_id: str, key: SessionKey, n: int) -> PendingRecord:
    """The record of `approval(pending_id, amount=n)`, appended after its reply at seq 2n + 1."""
    args, reason, at = {"amount": n}, "refunds need a human", "2026-01-01T00:00:00.000Z"
    return PendingRecord(
        pending_id,
        key.id,
        key.tenant,
        key.agent,
        "approval",
        "",
        "refund",
        args,
        reason,
        at,
        2 * n + 1,
    )


async def test_pending_filters_combine(make_log: MakeLog) -> None:
    """Agent, session, status and cursor together; each record is its row as derived."""
    log = await make_log(clock=Clock(T0))
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    other = SessionKey("acme", "billing", "order-1002")
    other_lease = (await log.claim(other, "run-2", ttl=30)).lease
    for n in range(4):
        await log.append(lease, [reply(), approval(f"a-{n}", amount=n)])
        await log.append(other_lease, [reply(), approval(f"b-{n}", amount=n)])
    await decide(log, "b-1", "approved", note="fine")
    await decide(log, "b-3", "approved")
    approved = {"status": "approved", "decided_by": "ann", "decided_at": AT0}

    page = await log.pending("acme", agent="billing", session=other, status="approved", limit=1)
    assert page.items == [replace(item("b-1", other, 1), **approved, note="fine")]
    rest = await log.pending(
        "acme", agent="billing", session=other, status="approved", cursor=page.cursor
    )
    assert (rest.items, rest.cursor) == ([replace(item("b-3", other, 3), **approved)], None)
    assert (await log.pending("acme", agent="support", session=other)).items == []
    opened = await log.pending("acme", session=KEY, limit=3)
    assert opened.items == [item(f"a-{n}", KEY, n) for n in range(3)]
    assert await log.pending_item("acme", "a-3") == item("a-3", KEY, 3)
    assert (await log.pending("acme", session=SessionKey("acme", "support", "no"))).items == []


async def test_usage_of_a_session_without_requests_is_zero(make_log: MakeLog) -> None:
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    await log.claim(CHILD, "run-1", ttl=30, parent=KEY)
    await log.append(lease, [reply(usage=Usage(input_tokens=7, output_tokens=3))])
    zero = {
        "requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost": None,
    }
    assert await log.usage("acme", key=CHILD) == zero
    once = {**zero, "requests": 1, "input_tokens": 7, "output_tokens": 3}
    assert await log.usage("acme", key=KEY) == once
    assert await log.usage("globex") == zero


async def test_attachments_are_read_by_hash(make_log: MakeLog) -> None:
    """The bytes of the hashes the log has, whichever session stored them; none for the rest."""
    log = await make_log()
    lease = (await log.claim(KEY, "run-1", ttl=30)).lease
    pictures = [image(b"\x89PNG\r\n\x1a\n" + bytes([n]) * 8, name=f"{n}.png") for n in range(2)]
    message = UserMessage(content="look", attachments=tuple(pictures))
    await log.append(lease, [ev.InputReceived(message=message)])
    sha = [p.sha256 or "" for p in pictures]
    other = await make_log()
    assert await other.attachments([*sha, "0" * 64]) == {
        sha[0]: b"\x89PNG\r\n\x1a\n" + bytes([0]) * 8,
        sha[1]: b"\x89PNG\r\n\x1a\n" + bytes([1]) * 8,
    }
    assert await other.attachments(["0" * 64]) == {}
    assert await other.attachments([]) == {}
