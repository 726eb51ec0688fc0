"""A session's history over HTTP (issue 32, goal 2): all of it as before, or a page read
backwards (`?limit`, `?cursor` → `nextCursor`), served from the session the runtime keeps after
its last run while it is the log's — nothing read back from the log — and, from a server that
does not keep it, opened from the log to the same body."""

from __future__ import annotations

from typing import Any

import httpx

from live_server import serving
from loopwright.runtime import journal
from loopwright.server.pages import encode

SID = "pages-1"


def body(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def expected(n: int) -> list[dict[str, Any]]:
    """The history of `n` messages "m0" … to the shop agent (each answered "heard: …")."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        heard = " | ".join(f"m{j}" for j in range(i + 1))
        out += [
            {"content": f"m{i}", "role": "user"},
            {
                "parts": [{"text": f"heard: {heard}", "type": "text"}],
                "stopReason": "end_turn",
                "model": "function:inline",
                "role": "assistant",
            },
        ]
    return out


def bare(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without their usage (the model's token estimate)."""
    return [{k: v for k, v in m.items() if k != "usage"} for m in history]


def test_the_history_is_served_whole_or_in_pages_from_the_kept_session(tmp_path, monkeypatch):
    read: list[str] = []
    real = journal.read_state

    async def counting(log, key, tools, *, died):
        read.append(key.id)
        return await real(log, key, tools, died=died)

    monkeypatch.setattr(journal, "read_state", counting)
    url = f"/agents/shop/sessions/{SID}"
    with serving(tmp_path / "shop") as server, server.client() as http:
        for i in range(5):
            sent = {"message": f"m{i}", "sessionId": SID}
            assert body(http.post("/agents/shop/messages", json=sent), 200)["sessionId"] == SID
        opened = len(read)
        whole = body(http.get(url), 200)
        assert list(whole) == [
            *("sessionId", "title", "activeAgent", "status", "lastSeq", "history", "pending"),
            *("usage", "forkedFrom"),
        ]
        assert (whole["sessionId"], whole["status"], whole["pending"]) == (SID, "idle", [])
        assert bare(whole["history"]) == expected(5)
        assert read == read[:opened]  # the kept session: nothing was read from the log
        pages, cursor = [], None
        while True:
            query = "?limit=4" + (f"&cursor={cursor}" if cursor else "")
            page = body(http.get(url + query), 200)
            assert list(page) == [
                *(
                    "sessionId",
                    "title",
                    "activeAgent",
                    "status",
                    "lastSeq",
                    "history",
                    "pending",
                    "usage",
                    "forkedFrom",
                ),
                *("historyStart", "historyLength", "nextCursor"),
            ]
            pages.append((page["historyStart"], page["historyLength"], len(page["history"])))
            assert (
                bare(page["history"]) == expected(5)[page["historyStart"] :][: len(page["history"])]
            )
            if (cursor := page["nextCursor"]) is None:
                break
        assert pages == [(6, 10, 4), (2, 10, 4), (0, 10, 2)]
        assert read == read[:opened]  # the kept session: nothing was read from the log
        assert body(http.get(url + f"?cursor={encode('6')}"), 200)["historyStart"] == 0
        for query, error in [
            ("?limit=0", "limit must be an integer from 1 to 1000"),
            ("?limit=1001", "limit must be an integer from 1 to 1000"),
            ("?limit=two", "limit must be an integer from 1 to 1000"),
            ("?cursor=%21", "cursor is not one this server gave (use nextCursor as it is)"),
            (
                f"?cursor={encode('x')}",
                "cursor is not one this server gave (use nextCursor as it is)",
            ),
            (f"?cursor={encode('11')}", "cursor is past the history (the history has 10 messages)"),
        ]:
            assert body(http.get(url + query), 400) == {"error": error}, query


def test_a_server_that_does_not_keep_the_session_opens_it_to_the_same_history(tmp_path):
    url = f"/agents/shop/sessions/{SID}"
    root = tmp_path / "shop"
    with serving(root) as server, server.client() as http:
        for i in range(3):
            http.post("/agents/shop/messages", json={"message": f"m{i}", "sessionId": SID})
        kept = body(http.get(url), 200)
        page = body(http.get(url + "?limit=3"), 200)
    (root / "agents").rename(tmp_path / "agents-moved")  # (`serving` writes the project again)
    with serving(root) as server, server.client() as http:
        assert body(http.get(url), 200) == kept
        assert body(http.get(url + "?limit=3"), 200) == page
    assert bare(kept["history"]) == expected(3)
    assert (bare(page["history"]), page["historyStart"], page["nextCursor"]) == (
        expected(3)[3:],
        3,
        encode("3"),
    )
