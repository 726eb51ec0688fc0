"""The event-log seam's conformance suite: usage reports (`ReadModels.usage_report`), the stored
per-request usage rows summed by agent, session, day and model, paged by the group's key.
Run on both backends by `test_log_conformance.py`, like the other parts."""

from __future__ import annotations

from typing import Any

import pytest

from log_conformance import KEY, Clock, MakeLog
from loopwright import events as ev
from loopwright.messages import AssistantMessage, Text, Usage
from loopwright.store.log import SessionKey, Store
from loopwright.store.usage_report import UsageQuery

DAY = 86_400.0
CHILD = SessionKey("acme", "billing", "order-1001/billing/call-1")
OTHER = SessionKey("acme", "billing", "b-7")
FOREIGN = SessionKey("globex", "support", "order-1001")


def used(i: int, o: int, cost: float | None = None, model: str = "m") -> ev.MessageCompleted:
    """A reply from `model` with this usage."""
    usage = Usage(input_tokens=i, output_tokens=o, cost=cost)
    return ev.MessageCompleted(
        message=AssistantMessage(parts=(Text(text="ok"),), usage=usage, model=model)
    )


async def write(
    log: Store, key: SessionKey, *events: Any, parent: SessionKey | None = None
) -> None:
    lease = (await log.claim(key, f"run-{key.id}", ttl=30, parent=parent)).lease
    await log.append(lease, list(events))
    await log.release(lease, "idle")


async def usage_log(make_log: MakeLog) -> Store:
    """Day 1: the support session (two requests, model a and b) and its subagent's (one);
    day 2: another billing session (one request without a cost); another tenant's session."""
    clock = Clock(1_700_000_000.0)  # 2023-11-14 22:13:20 UTC
    log = await make_log(clock=clock)
    await write(log, KEY, used(10, 1, 0.5, "a"), used(20, 2, 0.25, "b"))
    await write(log, CHILD, used(5, 5, 0.125, "a"), parent=KEY)
    clock.advance(DAY)
    await write(log, OTHER, used(7, 3, None, "a"))
    await write(log, FOREIGN, used(1000, 1000, 99.0, "a"))
    return log


def sums(requests: int, i: int, o: int, cost: float | None, unpriced: int = 0) -> dict[str, Any]:
    return {
        "requests": requests,
        "input_tokens": i,
        "output_tokens": o,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost": cost,
        "unpriced": unpriced,
    }


async def test_usage_sums_a_tenants_rows_by_any_grouping(make_log: MakeLog) -> None:
    log = await usage_log(make_log)
    total = await log.usage_report(UsageQuery(tenant="acme"))
    assert (total.items, total.cursor) == ([sums(4, 42, 11, 0.875, unpriced=1)], None)
    by_agent = await log.usage_report(UsageQuery(tenant="acme", by=("agent",)))
    assert by_agent.items == [
        {"agent": "billing", **sums(2, 12, 8, 0.125, unpriced=1)},
        {"agent": "support", **sums(2, 30, 3, 0.75)},
    ]
    by_day_model = await log.usage_report(UsageQuery(tenant="acme", by=("day", "model")))
    assert by_day_model.items == [
        {"day": "2023-11-14", "model": "a", **sums(2, 15, 6, 0.625)},
        {"day": "2023-11-14", "model": "b", **sums(1, 20, 2, 0.25)},
        {"day": "2023-11-15", "model": "a", **sums(1, 7, 3, None, unpriced=1)},  # no price known
    ]
    by_session = await log.usage_report(UsageQuery(tenant="acme", by=("agent", "session")))
    assert [(g["agent"], g["session"], g["requests"]) for g in by_session.items] == [
        ("billing", "b-7", 1),
        ("billing", "order-1001/billing/call-1", 1),
        ("support", "order-1001", 2),
    ]


async def test_usage_filters_by_agent_session_tree_and_days(make_log: MakeLog) -> None:
    log = await usage_log(make_log)

    async def report(**given: Any) -> list[dict[str, Any]]:
        return (await log.usage_report(UsageQuery(tenant="acme", **given))).items

    assert await report(agent="billing") == [sums(2, 12, 8, 0.125, unpriced=1)]
    # a session's usage includes its subagents' sessions
    assert await report(agent="support", session="order-1001") == [sums(3, 35, 8, 0.875)]
    assert await report(agent="billing", session="b-7", by=("model",)) == [
        {"model": "a", **sums(1, 7, 3, None, unpriced=1)}
    ]
    assert await report(since="2023-11-15") == [sums(1, 7, 3, None, unpriced=1)]
    assert await report(until="2023-11-14", by=("day",)) == [
        {"day": "2023-11-14", **sums(3, 35, 8, 0.875)}
    ]
    assert await report(agent="nobody") == [sums(0, 0, 0, None)]
    assert (await log.usage_report(UsageQuery(tenant="initech"))).items == [sums(0, 0, 0, None)]


async def test_usage_pages_by_the_groups_key(make_log: MakeLog) -> None:
    log = await usage_log(make_log)
    by = ("day", "model")
    seen, cursor, pages = [], None, 0
    while True:
        page = await log.usage_report(UsageQuery(tenant="acme", by=by, limit=2, cursor=cursor))
        seen += [(g["day"], g["model"]) for g in page.items]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        # a row added between pages, to a group already shown, never shifts the next page
        await write(log, SessionKey("acme", "support", f"late-{pages}"), used(1, 1, 0.0, "a"))
    assert (pages, seen) == (
        2,
        [("2023-11-14", "a"), ("2023-11-14", "b"), ("2023-11-15", "a")],
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"by": ("tenant",)}, "group by any of agent, session, day, model"),
        ({"by": ("day", "day")}, "each once"),
        ({"session": "order-1001"}, "a session is named with its agent"),
        ({"since": "2023-1-1"}, "is not a day"),
        ({"limit": 0}, "limit must be between 1 and 1000"),
    ],
)
def test_a_usage_query_says_what_is_wrong(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        UsageQuery(tenant="acme", **given)


@pytest.mark.parametrize("cursor", ["x", "WyJhIl0", "WzFd", "bnVsbA"])
async def test_a_usage_cursor_the_log_did_not_give_is_refused(
    make_log: MakeLog, cursor: str
) -> None:
    log = await usage_log(make_log)
    with pytest.raises(ValueError, match="is not one this log gave"):
        await log.usage_report(UsageQuery(tenant="acme", by=("day", "model"), cursor=cursor))
