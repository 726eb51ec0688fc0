"""No read answers everything at once: listings come a page at a time (`limit`, `cursor` →
`nextCursor`) and event reads too (`after`, `limit` → `nextAfter`, `more`), with a default page
size, over HTTP and on the command line (where `--all` lists everything, a page at a time, and
`sessions show/export` read the log a page at a time)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live_server import LiveServer, make_project
from loopwright import events as ev
from loopwright.cli import sessions as sessions_cli
from loopwright.cli.main import main
from loopwright.messages import UserMessage
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log

BARE = 101  # one more than a default page
LONG = 1203  # events of the long session


async def seed(path: Path) -> None:
    """The greeter's sessions: `BARE` without events, a subagent's, and `long`."""
    log = await open_log(path)
    try:
        for n in range(BARE):
            claimed = await log.claim(SessionKey("default", "greeter", f"s{n:03}"), "t", ttl=30)
            await log.release(claimed.lease, "idle")
        parent = SessionKey("default", "greeter", "s000")
        child = SessionKey("default", "greeter", "s000/helper")
        await log.release((await log.claim(child, "t", ttl=30, parent=parent)).lease, "idle")
        claimed = await log.claim(SessionKey("default", "greeter", "long"), "t", ttl=30)
        said = [ev.InputReceived(message=UserMessage(content=f"m{n}")) for n in range(LONG)]
        await log.append(claimed.lease, said)
        await log.release(claimed.lease, "idle")
    finally:
        await log.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("pages") / "shop")
    asyncio.run(seed(load_project(root).store_path()))
    return root


@pytest.fixture(scope="module")
def http(root: Path) -> Iterator[httpx.Client]:
    with LiveServer(create_app(load_project(root))) as live, live.client() as client:
        for n in range(3):  # three runs paused on an approval each
            sent = {"message": "refund it", "sessionId": f"r{n}"}
            assert client.post("/agents/shop/messages", json=sent).status_code == 202
        yield client


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def walk(http: httpx.Client, path: str, key: str, limit: int) -> list[list[Any]]:
    """Every page of a listing, following `nextCursor`."""
    pages, cursor = [], None
    while True:
        query = f"limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        body = ok(http.get(f"{path}?{query}"))
        assert set(body) == {key, "nextCursor"}
        pages.append(body[key])
        if (cursor := body["nextCursor"]) is None:
            return pages


def test_sessions_come_a_page_at_a_time(http: httpx.Client) -> None:
    first = ok(http.get("/agents/greeter/sessions"))
    assert len(first["sessions"]) == 100 and first["nextCursor"] is not None  # the default
    everything = ok(http.get("/agents/greeter/sessions?limit=1000"))
    assert everything["nextCursor"] is None
    ids = [s["id"] for s in everything["sessions"]]
    assert sorted(ids) == sorted([f"s{n:03}" for n in range(BARE)] + ["long"])  # no subagent's
    paged = walk(http, "/agents/greeter/sessions", "sessions", 40)
    assert [len(p) for p in paged] == [40, 40, 22]
    assert [s["id"] for page in paged for s in page] == ids
    rest = ok(http.get(f"/agents/greeter/sessions?cursor={first['nextCursor']}"))
    assert [s["id"] for s in first["sessions"] + rest["sessions"]] == ids


def test_open_items_come_a_page_at_a_time(http: httpx.Client) -> None:
    everything = ok(http.get("/pending"))
    ids = [item["id"] for item in everything["items"]]
    assert len(ids) == 3 and everything["nextCursor"] is None
    assert [[i["id"] for i in p] for p in walk(http, "/pending", "items", 2)] == [ids[:2], ids[2:]]
    approvals = walk(http, "/agents/shop/approvals", "approvals", 1)
    assert [a["id"] for page in approvals for a in page] == ids
    assert walk(http, "/agents/greeter/approvals", "approvals", 5) == [[]]
    assert walk(http, "/agents/shop/questions", "questions", 5) == [[]]


def test_events_come_a_page_at_a_time_and_say_where_to_go_on(http: httpx.Client) -> None:
    events = "/agents/greeter/sessions/long/events"
    first = ok(http.get(events))
    assert (len(first["events"]), first["nextAfter"], first["more"]) == (500, 500, True)
    assert [e["seq"] for e in first["events"]] == list(range(1, 501))
    rest = ok(http.get(f"{events}?after=500&limit=1000"))
    assert (len(rest["events"]), rest["nextAfter"], rest["more"]) == (LONG - 500, LONG, False)
    said = [e["event"]["message"]["content"] for e in first["events"] + rest["events"]]
    assert said == [f"m{n}" for n in range(LONG)]
    assert ok(http.get(f"{events}?after={LONG}")) == {
        "events": [],
        "nextAfter": LONG,
        "more": False,
    }
    exact = ok(http.get(f"{events}?after=1200&limit=3"))
    assert (exact["nextAfter"], exact["more"]) == (LONG, False)
    # v1 leaves these events out: the page is empty, and still says where to go on
    v1 = ok(http.get(f"{events}?profile=v1&limit=10"))
    assert v1 == {"events": [], "nextAfter": 10, "more": True}


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "limit=-1",
        "limit=%C2%B3",  # "³": a digit to `str.isdigit`, not to `int`
        "cursor=not*base64",
        "cursor=" + base64.urlsafe_b64encode(b"x:y").decode().rstrip("="),
        "cursor=" + base64.urlsafe_b64encode(b"99999999999999999999999:y").decode().rstrip("="),
        "cursor=AAAA",
    ],
)
def test_a_bad_limit_or_cursor_is_a_400(http: httpx.Client, query: str) -> None:
    for path in ("/agents/greeter/sessions", "/pending", "/agents/shop/approvals"):
        answer = http.get(f"{path}?{query}")
        assert answer.status_code == 400, (path, answer.text)
        assert re.fullmatch(
            r"(limit must be .*|cursor is not one this server gave.*)", answer.json()["error"]
        )


def test_an_event_limit_past_the_maximum_is_a_400(http: httpx.Client) -> None:
    answer = http.get("/agents/greeter/sessions/long/events?limit=5001")
    assert answer.status_code == 400
    assert answer.json() == {"error": "limit must be an integer from 1 to 5000"}


# ---- the command line --------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[str, str]:
    assert main([*args, "--project", str(root)]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def rows(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:]]  # (the header aside)


def test_sessions_lists_a_page_and_says_how_to_read_on(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = cli(capsys, root, "sessions", "--agent", "greeter", "--limit", "60")
    first = rows(out)
    assert len(first) == 60
    more = re.fullmatch(r"more sessions: --cursor (.+) \(or --all\)\n", err)
    assert more is not None
    out, err = cli(
        capsys, root, "sessions", "--agent", "greeter", "--cursor", *shlex.split(more[1])
    )
    assert err == "" and len(rows(out)) == BARE + 2 - 60  # the rest, with the subagent's
    out, err = cli(capsys, root, "sessions", "--agent", "greeter", "--all", "--json")
    listed = [json.loads(line)["id"] for line in out.splitlines()]
    assert err == "" and listed[:60] == first and len(listed) == BARE + 2
    out, err = cli(capsys, root, "sessions", "--agent", "greeter")
    assert len(rows(out)) == 50 and err.startswith("more sessions: --cursor ")  # the default


def test_a_made_up_cursor_is_a_usage_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--cursor", "x:y", "--project", str(root)]) == 2
    assert "--cursor x:y is not one loopwright printed" in capsys.readouterr().err


def test_approvals_lists_a_page(
    root: Path, http: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = cli(capsys, root, "approvals", "--limit", "2")
    assert len(rows(out)) == 2 and err.startswith("more items: --cursor ")
    out, err = cli(capsys, root, "approvals", "--all", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [
        item["id"] for item in ok(http.get("/pending"))["items"]
    ]


def test_show_and_export_read_the_log_a_page_at_a_time(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_cli, "EXPORT_PAGE", 500)
    out, _ = cli(capsys, root, "sessions", "export", "long", "--agent", "greeter")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, LONG + 1))
    assert lines[-1]["event"]["message"]["content"] == f"m{LONG - 1}"
    out, _ = cli(capsys, root, "sessions", "show", "long", "--agent", "greeter")
    assert out.splitlines()[1:] == [
        *(f"user: m{n}" for n in range(LONG)),
        "usage: 0 model requests · 0 in · 0 out · $0 (with its subagents)",
    ]
