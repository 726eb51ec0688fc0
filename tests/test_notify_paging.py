"""`GET /notifications` a page at a time, through a served project on 127.0.0.1: `?limit` and
`?cursor` as every listing, `nextCursor` in the body, the same 400s as `GET /pending` for a bad
limit or cursor. And PostgreSQL's pages in byte order under a language collation, as SQLite's.
(The outbox's paging on both backends: log_conformance_outbox.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from live_server import serving
from log_conformance import reply, said
from loopwright import events as ev
from loopwright.project import load_project
from loopwright.store.log import SessionKey
from loopwright.store.outbox import AttemptOutcome, Delivery, outbox_of
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.store.sqlite_rows import iso

NOW = 1_000_000.0
KEY = SessionKey("default", "shop", "s-1")  # (the tenant of a server without tokens)


def approval(pending_id: str) -> ev.ApprovalPending:
    scope = ev.Scope(tenant=KEY.tenant, environment="prod", agent=KEY.agent)
    return ev.ApprovalPending(
        id=pending_id,
        tool="refund",
        args={"order": pending_id},
        scope=scope,
        reason="refunds need a human",
        requested_at="2026-01-01T00:00:00.000Z",
    )


async def outbox_with_deliveries(path: Path) -> list[Delivery]:
    """Three items pending, each told to `audit` and `ops` (six deliveries), the first item's
    posted to `ops` once (a 503); the deliveries as the outbox lists them."""
    log = SQLiteLog(path)
    try:
        lease = (await log.claim(KEY, "run-1", ttl=30)).lease
        events = [said("refunds"), reply(), *(approval(f"p-{n}") for n in range(3))]
        await log.append(lease, events)
        outbox = outbox_of(log)
        for target in ("ops", "audit"):
            assert await outbox.expand(target, ("pending",), NOW, max_age=3600) == 3
        for claimed in await outbox.claim(["ops"], NOW, hold=30, owner="test"):
            if claimed.notice.item == "p-0":
                await outbox.record(claimed, AttemptOutcome("due", "t1", status=503, due=NOW + 10))
        return (await outbox.deliveries(KEY.tenant)).items
    finally:
        await log.close()


def shown(d: Delivery, item: str, target: str, tried: list[Any]) -> dict[str, Any]:
    """A delivery as the route shows it, from the facts the test made."""
    assert (d.notice.item, d.target) == (item, target)
    return {
        "id": d.id,
        "target": target,
        "item": item,
        "event": "pending",
        "state": "due",
        "attempts": len(tried),
        "lastStatus": tried[-1]["status"] if tried else None,
        "lastError": None,
        "createdAt": iso(NOW),
        "deliveredAt": None,
        "tried": tried,
    }


def test_notifications_are_listed_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    monkeypatch.delenv("LOOPWRIGHT_STORE_URL", raising=False)
    with serving(tmp_path / "shop") as live, live.client() as http:
        store = load_project(live.root).store_url()
        assert isinstance(store, Path)
        made = asyncio.run(outbox_with_deliveries(store))
        first = http.get("/notifications", params={"limit": 4})
        assert first.status_code == 200
        assert first.json() == {
            "deliveries": [
                shown(made[0], "p-2", "audit", []),
                shown(made[1], "p-2", "ops", []),
                shown(made[2], "p-1", "audit", []),
                shown(made[3], "p-1", "ops", []),
            ],
            "nextCursor": "MjpvcHM",  # (base64url of the log's "2:ops")
        }
        second = http.get("/notifications", params={"limit": 4, "cursor": "MjpvcHM"})
        assert second.status_code == 200
        assert second.json() == {
            "deliveries": [
                shown(made[4], "p-0", "audit", []),
                shown(made[5], "p-0", "ops", [{"n": 1, "at": "t1", "status": 503, "error": None}]),
            ],
            "nextCursor": None,
        }
        everything = http.get("/notifications").json()  # (100 by default: one page)
        assert [d["id"] for d in everything["deliveries"]] == [d.id for d in made]
        assert everything["nextCursor"] is None
        one = http.get("/notifications", params={"item": "p-1", "limit": 1}).json()
        assert [(d["item"], d["target"]) for d in one["deliveries"]] == [("p-1", "audit")]
        after = {"item": "p-1", "limit": 1, "cursor": one["nextCursor"]}
        assert [
            d["target"] for d in http.get("/notifications", params=after).json()["deliveries"]
        ] == ["ops"]


BAD = [
    {"limit": "0"},
    {"limit": "1001"},
    {"limit": "two"},
    {"cursor": "not a cursor"},
    {"cursor": "eA"},  # base64url of "x": well formed, not one the log gave
    {"cursor": "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA6b3Bz"},  # "12345678901234567890:ops"
]


def test_a_bad_limit_or_cursor_is_refused_as_every_listing_refuses_it(tmp_path: Path) -> None:
    with serving(tmp_path / "shop") as live, live.client() as http:
        for query in BAD:
            refused = http.get("/notifications", params=query)
            pending = http.get("/pending", params=query)
            assert pending.status_code == 400, query
            assert (refused.status_code, refused.json()) == (400, pending.json()), query


async def test_postgresql_pages_in_byte_order_whatever_the_collation(pg_url: str) -> None:
    """A database whose text sorts by a language's rules ('alpha' < 'Zed') lists deliveries as
    SQLite does ('Zed' < 'alpha'): the cursor a page ends on is compared the same way."""
    import psycopg

    from loopwright.store.pg_log import PostgresLog

    with psycopg.connect(pg_url, autocommit=True) as db:
        row = db.execute(
            "SELECT collname FROM pg_collation WHERE collname IN ('und-x-icu', 'en_US.utf8') "
            "ORDER BY collname DESC LIMIT 1"
        ).fetchone()
    if row is None:
        pytest.skip("no language collation in this PostgreSQL (no ICU, no en_US.utf8)")
    collation = row[0]
    log = await PostgresLog(pg_url).open()
    try:
        with psycopg.connect(pg_url, autocommit=True) as db:
            db.execute(
                "ALTER TABLE loopwright_deliveries "
                f'ALTER COLUMN target TYPE text COLLATE "{collation}"'
            )
            ordered = db.execute(f"SELECT 'alpha' < 'Zed' COLLATE \"{collation}\"").fetchone()
            assert ordered == (True,)
        lease = (await log.claim(KEY, "run-1", ttl=30)).lease
        await log.append(lease, [said("refunds"), reply(), approval("p-0"), approval("p-1")])
        outbox = outbox_of(log)
        for target in ("alpha", "Zed"):
            assert await outbox.expand(target, ("pending",), NOW, max_age=3600) == 2
        first = await outbox.deliveries(limit=3)
        assert ([(d.notice.item, d.target) for d in first.items], first.cursor) == (
            [("p-1", "Zed"), ("p-1", "alpha"), ("p-0", "Zed")],
            "1:Zed",
        )
        rest = await outbox.deliveries(limit=3, cursor=first.cursor)
        assert ([(d.notice.item, d.target) for d in rest.items], rest.cursor) == (
            [("p-0", "alpha")],
            None,
        )
    finally:
        await log.close()
