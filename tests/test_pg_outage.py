"""A PostgreSQL outage, against a real server that is stopped and started again: while it is
down every call is a short 503 with `Retry-After` that names no host, port, user or database
(the operator's log has them), each one bounded by the log's connection timeout (about a
second, not psycopg_pool's 30 s) — and once the server is back the same process serves again,
reads and writes, with nothing restarted on our side."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from live_server import serving
from loopwright.server.app import STORE_DOWN
from loopwright.store.pg_log import PostgresLog
from loopwright.store.pg_pool import CONNECT_TIMEOUT
from pg_cluster import Cluster, Unavailable, unavailable


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A private server of this test's own (the test stops and starts it)."""
    try:
        own = Cluster()
        own.start()
    except Unavailable as exc:
        unavailable(str(exc))
    try:
        yield own
    finally:
        own.stop()


def test_a_database_outage_is_a_short_503_and_service_resumes_after_it(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = urlsplit(cluster.url)
    details = [url.hostname, str(url.port), url.username, url.path.lstrip("/")]
    assert details == ["127.0.0.1", str(url.port), "postgres", "postgres"]
    toml = f'[store]\nurl = "{cluster.url}"\n'
    with serving(tmp_path / "shop", toml) as live, live.client() as http:
        log = live.app.state.loopwright.log
        assert isinstance(log, PostgresLog)
        assert log.db.connect_timeout == CONNECT_TIMEOUT == 1.0  # the bound of every wait
        hello = {"message": "hello", "sessionId": "s1"}
        assert http.post("/agents/shop/messages", json=hello).json()["text"] == "heard: hello"

        cluster.halt()
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="loopwright.server"):
            down = [
                http.get("/agents/shop/sessions/s1"),
                http.get("/agents/shop/sessions/s1/events"),
                http.post("/agents/shop/messages", json={**hello, "message": "again"}),
                http.get("/pending"),
            ]
        for answer in down:
            assert (answer.status_code, answer.json()) == (503, {"error": STORE_DOWN})
            assert answer.headers["retry-after"] == "2"
            assert not [d for d in details if d in answer.text]
        told = [r.getMessage() for r in caplog.records if r.name == "loopwright.server"]
        assert len(told) == len(down)
        assert all("127.0.0.1" in t and str(url.port) in t for t in told)  # the operator's
        # a call waits at most the configured timeout for a connection (psycopg_pool says so)
        assert any("couldn't get a connection after 1.00 sec" in t for t in told), told

        cluster.restart()
        shown = http.get("/agents/shop/sessions/s1")
        assert shown.status_code == 200
        assert [m["role"] for m in shown.json()["history"]] == ["user", "assistant"]
        again = http.post("/agents/shop/messages", json={**hello, "message": "back"})
        assert again.json()["text"] == "heard: hello | back"
