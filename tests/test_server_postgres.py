"""Two servers on one PostgreSQL database (`[store] url` in loopwright.toml): a client of the
first holds a run's stream; a client of the second sees the session, decides its pending item
and follows the run executing on the first (woken by the database's notifications); the held
stream goes on to the real `done`. (Several `loopwright serve` processes on one database are
the same, out of process.)"""

from __future__ import annotations

from pathlib import Path

from live_server import LiveServer, make_project
from loopwright.project import load_project
from loopwright.server import create_app
from loopwright.store.pg_log import PostgresLog
from test_server import body
from test_server_held import ASKED, WENT_ON, logged_types, until, went_on
from test_server_stream import Frames, as_logged, logged, stream


def test_two_servers_on_one_database_serve_one_run(tmp_path: Path, pg_url: str) -> None:
    root = make_project(tmp_path / "shop", f'[store]\nurl = "{pg_url}"\n')
    first = LiveServer(create_app(load_project(root)))
    second = LiveServer(create_app(load_project(root)))
    assert isinstance(first.app.state.loopwright.log, PostgresLog)
    with first, second, first.client() as http, second.client() as there:
        with stream(http, "refund A-1") as response:
            reader = Frames(response)
            read = until(reader, "pending:requested")
            sid, pid = read[0]["event"]["sessionId"], read[-1]["event"]["id"]
            shown = body(there.get(f"/agents/shop/sessions/{sid}"), 200)  # live, elsewhere
            assert (shown["status"], [p["id"] for p in shown["pending"]]) == ("running", [pid])
            url = f"/agents/shop/sessions/{sid}/stream"
            with there.stream("GET", url, headers={"Last-Event-ID": "0"}) as followed:
                watcher = Frames(followed)
                assert logged_types(until(watcher, "pending:requested")) == ASKED
                answered = body(
                    there.post(f"/approvals/{pid}/approve", json={"by": "ops"}),
                    200,
                )
                rest = watcher.read()
            read += reader.read()
        assert went_on(read, http, "loopback")["id"] == pid
        assert answered["text"] == "Done: refunded 5 on A-1"
        assert logged_types(rest) == WENT_ON
        as_logged(rest, logged(there, sid)[len(ASKED) :])
