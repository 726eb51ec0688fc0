"""The server's streams and live runs: SSE framing with the log's sequence numbers as `id:` (only
on events the log holds when they are sent), a client that leaves mid-run (the run goes on and
pauses durably at its ask, and is approved later), `Last-Event-ID`, 409 on a busy session (here
and in another process), steer, cancel and compact."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from conftest import V1
from loopwright import events as ev
from loopwright.store import StoredEvent
from loopwright.store.log import SessionKey
from loopwright.store.opening import open_log
from test_server import (
    PAUSED_RUN,
    RESUMED_RUN,
    LiveServer,
    body,
    check_full,
    check_v1,
    served,
    types,
)

server = served("stream")


FRAME = re.compile(r"event: ([a-z_:]+)\n(?:id: (\d+)\n)?data: (\{.*\})")


class Frames:
    """An SSE body read frame by frame, checking the framing of each: `event:`, then `id:`
    (never on a token delta; on other events once the log holds them), then one `data:`
    line."""

    def __init__(self, response: httpx.Response) -> None:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        self.chunks = response.iter_text()
        self.buffer = ""

    def read(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The next `limit` frames (all the rest when None)."""
        out: list[dict[str, Any]] = []
        while limit is None or len(out) < limit:
            if "\n\n" not in self.buffer:
                chunk = next(self.chunks, None)
                if chunk is None:
                    assert self.buffer == ""
                    return out
                self.buffer += chunk
                continue
            block, self.buffer = self.buffer.split("\n\n", 1)
            if block.startswith(":"):
                continue  # keep-alive comment
            match = FRAME.fullmatch(block)
            assert match, f"bad frame: {block!r}"
            kind, seq, data = match.groups()
            event = json.loads(data)
            assert event["type"] == kind
            assert seq is None or not kind.endswith(":delta"), block
            out.append({"id": None if seq is None else int(seq), "event": event})
        return out


def frames(response: httpx.Response, limit: int | None = None) -> list[dict[str, Any]]:
    return Frames(response).read(limit)


def events_of(read: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["event"] for f in read]


def stream(http: httpx.Client, message: str, **extra: Any) -> Any:
    return http.stream(
        "POST", "/agents/shop/messages/stream", json={"message": message, **extra}, params=None
    )


def logged(http: httpx.Client, sid: str, agent: str = "shop") -> list[dict[str, Any]]:
    return list(body(http.get(f"/agents/{agent}/sessions/{sid}/events"), 200)["events"])


def as_logged(read: list[dict[str, Any]], log: list[dict[str, Any]]) -> None:
    """A stream carried the log's events in its order, none missing (`log`: the log from the
    stream's start; `message:partial` is never streamed), and each `id:` it carried is the seq
    of that very event in the log."""
    stored = [e for e in log if e["event"]["type"] != "message:partial"]
    streamed = [f["event"] for f in read if not f["event"]["type"].endswith(":delta")]
    assert streamed == [e["event"] for e in stored]
    by_seq = {e["seq"]: e["event"] for e in log}
    ids = [f["id"] for f in read if f["id"] is not None]
    assert ids == sorted(set(ids))
    for f in read:
        if f["id"] is not None:
            assert by_seq[f["id"]] == f["event"]


def wait_logged(
    root: Path, key: SessionKey, until: Callable[[ev.Event], bool]
) -> list[StoredEvent]:
    """The session's log up to the first event `until` accepts, read as it is committed by a
    reader of its own (it does not follow the session in the server's runtime)."""

    async def read() -> list[StoredEvent]:
        log = await open_log(root / ".loopwright" / "loopwright.db")
        try:
            out = []
            async for stored in log.follow(key, after=0):
                out.append(stored)
                if until(stored.event):
                    return out
            raise AssertionError("the log's follow ended")
        finally:
            await log.close()

    return asyncio.run(read())


def test_a_streamed_run_has_one_frame_per_event_with_the_log_seq(http: httpx.Client):
    with stream(http, "hello there") as response:
        read = frames(response)
    events = events_of(read)
    assert [t for t in types(events) if t != "text:delta"] == [
        "session",
        "input:received",
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    assert "".join(e["delta"] for e in events if e["type"] == "text:delta") == "heard: hello there"
    check_full(events, deltas=True)
    sid = events[0]["sessionId"]
    log = logged(http, sid)
    as_logged(read, log)
    assert [f["id"] for f in read[:2]] == [1, 2]  # the input is in the log before the answer
    with http.stream(
        "POST",
        "/agents/shop/messages/stream?profile=v1",
        json={"message": "again", "sessionId": sid},
    ) as response:
        v1 = frames(response)
    assert types(events_of(v1)) == ["session", "budget:check", "loop:done", "done"]
    assert v1[0]["id"] == 9
    seqs = {e["seq"]: e["event"]["type"] for e in logged(http, sid)}
    assert all(seqs[f["id"]] == f["event"]["type"] for f in v1 if f["id"] is not None)
    check_v1(events_of(v1))


def test_a_client_that_leaves_does_not_cancel_the_run(http: httpx.Client, server: LiveServer):
    with server.hold("refund, then leave") as release:
        with stream(http, "refund, then leave") as response:
            first = frames(response, limit=3)
        sid = first[0]["event"]["sessionId"]  # the client has left; the reply is still held
        release()
        key = SessionKey("default", "shop", sid)
        ended = wait_logged(server.root, key, lambda e: isinstance(e, ev.Done))
    assert ended[-1].event == ev.Done(text=ended[-1].event.text, stop_reason="paused")
    [item] = body(http.get(f"/agents/shop/sessions/{sid}/approvals"), 200)["approvals"]
    stored = [e["event"]["type"] for e in logged(http, sid)]
    assert [t for t in stored if t != "message:partial"] == PAUSED_RUN
    done = body(http.post(f"/approvals/{item['id']}/approve"), 200)
    assert done["text"] == "Done: refunded 5 on A-1"
    check_full(done["events"])


def test_an_approval_streams_the_resumed_run_when_asked(http: httpx.Client):
    paused = body(http.post("/agents/shop/messages", json={"message": "refund A-1"}), 202)
    headers = {"Accept": "text/event-stream"}
    with http.stream("POST", f"/approvals/{paused['id']}/approve", headers=headers) as response:
        read = frames(response)
    events = events_of(read)
    assert [t for t in types(events) if t != "text:delta"] == RESUMED_RUN
    check_full(events, deltas=True)
    log = logged(http, paused["sessionId"])
    assert log[len(PAUSED_RUN)]["event"]["type"] == "pending:decided"
    as_logged(read, log[len(PAUSED_RUN) + 1 :])  # the resumed run, from its start


def test_a_second_message_to_a_running_session_is_409_and_steering_lands(
    http: httpx.Client, server: LiveServer
):
    with server.hold("slow answer") as release, stream(http, "slow answer") as response:
        reader = Frames(response)
        read = reader.read(1)
        sid = read[0]["event"]["sessionId"]
        again = http.post("/agents/shop/messages", json={"message": "hi", "sessionId": sid})
        assert body(again, 409) == {
            "error": f"session {sid} is running: wait for its run to finish"
        }
        compact = http.post(f"/agents/shop/sessions/{sid}/compact")
        assert body(compact, 409) == {
            "error": f"session {sid} is running: wait for its run to finish"
        }
        steer = http.post(f"/agents/shop/sessions/{sid}/steer", json={"message": "also this"})
        assert body(steer, 202) == {"queued": True}
        release()
        rest = reader.read()
    events = events_of(read + rest)
    check_full(events, deltas=True)
    assert events[-1] == {
        "type": "done",
        "text": "heard: slow answer | also this",
        "stopReason": "completed",
    }
    injected = [e for e in events if e["type"] == "steering:injected"]
    assert [(e["mode"], e["message"]["content"]) for e in injected] == [("steer", "also this")]
    kinds = [e["event"]["type"] for e in logged(http, sid)]  # the 202 came after it was logged
    assert kinds.index("steering:queued") < kinds.index("steering:injected")
    late = http.post(f"/agents/shop/sessions/{sid}/steer", json={"message": "late"})
    assert body(late, 409) == {"error": f"session {sid} has no run in progress: send it a message"}


def test_a_session_claimed_by_another_process_is_409(http: httpx.Client, server: LiveServer):
    sid = body(http.post("/agents/shop/messages", json={"message": "first"}), 200)["sessionId"]
    key = SessionKey("default", "shop", sid)

    async def claimed_elsewhere() -> dict[str, Any]:  # another writer holds the session's lease
        other = await open_log(server.root / ".loopwright" / "loopwright.db")
        try:
            claim = await other.claim(key, "elsewhere", ttl=600)
            try:
                message = {"message": "second", "sessionId": sid}
                async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                    return dict(body(await client.post("/agents/shop/messages", json=message), 409))
            finally:
                await other.release(claim.lease, "idle")
        finally:
            await other.close()

    busy = asyncio.run(claimed_elsewhere())
    assert busy["error"].startswith(f"session {sid} is held by another run until ")
    again = http.post("/agents/shop/messages", json={"message": "second", "sessionId": sid})
    assert body(again, 200)["text"] == "heard: first | second"


def test_last_event_id_resumes_a_stream(http: httpx.Client, server: LiveServer):
    with server.hold("slow again") as release:
        with stream(http, "slow again") as response:
            read = frames(response, limit=4)
        # the model has not answered: step:started and budget:check are not in the log yet
        assert [(f["id"], f["event"]["type"]) for f in read] == [
            (1, "session"),
            (2, "input:received"),
            (None, "step:started"),
            (None, "budget:check"),
        ]
        sid = read[0]["event"]["sessionId"]
        url = f"/agents/shop/sessions/{sid}/stream"
        with http.stream("GET", url, headers={"Last-Event-ID": "2"}) as response:
            release()
            rest = frames(response)  # joins the live run after seq 2: nothing skipped
    log = [e for e in logged(http, sid) if e["event"]["type"] != "message:partial"]
    as_logged(rest, log[2:])
    assert [t for t in types(events_of(rest)) if t != "text:delta"] == [
        "step:started",
        "budget:check",
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]
    check_full(events_of(read[:2] + rest), deltas=True)
    headers = {"Accept": "text/event-stream"}
    events_url = f"/agents/shop/sessions/{sid}/events"
    last = [e["seq"] for e in log]
    with http.stream("GET", events_url, params={"after": last[-3]}, headers=headers) as response:
        assert [f["id"] for f in frames(response)] == last[-2:]
    with http.stream("GET", f"{url}?profile=v1") as response:
        replay = frames(response)
    assert [f["id"] for f in replay] == [last[0], last[3], last[-2], last[-1]]
    for frame in replay:
        V1.validate(frame["event"])


def test_a_stream_joined_mid_run_gets_the_log_then_the_live_events(
    http: httpx.Client, server: LiveServer
):
    with server.hold("slow joined") as release, stream(http, "slow joined") as response:
        reader = Frames(response)
        first = reader.read(1)
        sid = first[0]["event"]["sessionId"]
        with http.stream("GET", f"/agents/shop/sessions/{sid}/stream") as joined:
            release()
            everything = frames(joined)
        reader.read()
    events = events_of(everything)
    assert types(events)[0] == "session" and types(events)[-1] == "done"
    assert "text:delta" in types(events)
    check_full(events, deltas=True)
    as_logged(everything, logged(http, sid))


def test_cancel_stops_the_run_and_records_it(http: httpx.Client, server: LiveServer):
    with server.hold("slow to cancel"), stream(http, "slow to cancel") as response:
        reader = Frames(response)
        read = reader.read(2)
        sid = read[0]["event"]["sessionId"]
        cancelled = http.post(f"/agents/shop/sessions/{sid}/cancel")
        assert body(cancelled, 200) == {"cancelled": True}
        rest = reader.read()
    events = events_of(read + rest)
    check_full(events, deltas=True)
    assert types(events)[-2:] == ["loop:aborted", "done"]
    assert events[-1]["stopReason"] == "aborted"
    assert logged(http, sid)[-1]["event"]["stopReason"] == "aborted"
    assert body(http.post(f"/agents/shop/sessions/{sid}/cancel"), 200) == {"cancelled": False}
    assert body(http.post("/agents/shop/sessions/nope/cancel"), 404) == {
        "error": "no session 'nope' for agent 'shop'"
    }


def test_compact_on_demand(http: httpx.Client):
    sid = body(http.post("/agents/shop/messages", json={"message": "one"}), 200)["sessionId"]
    url = f"/agents/shop/sessions/{sid}/compact"
    assert body(http.post(url), 200) == {
        "sessionId": sid,
        "compacted": False,
        "reason": "nothing to compact: the history is short: the last 6 messages are always kept",
    }
    for text in ("two", "three", "four"):
        body(http.post("/agents/shop/messages", json={"message": text, "sessionId": sid}), 200)
    compacted = body(http.post(url, params={"profile": "v1"}), 200)
    assert (compacted["sessionId"], compacted["compacted"], compacted["stopReason"]) == (
        sid,
        True,
        "completed",
    )
    check_v1(compacted["events"])
    logged_now = [e["event"] for e in logged(http, sid)]
    [finished] = [e for e in logged_now if e["type"] == "compaction:finished"]
    assert (finished["from"], finished["to"], finished["mode"]) == (8, 7, "summarize")
    check_full(logged_now[-5:])
    assert body(http.post(url), 200)["reason"] == "nothing to compact: it was just compacted"


def test_many_streams_at_once_deliver_every_event_of_every_run_as_logged(server: LiveServer):
    """RELIABILITY's load check: 24 streams at once (12 slow replies, 12 refunds that wait on
    their held streams), each refund approved by another client while its stream is held.
    Every stream carries every event of its run, in the log's order and exactly as logged; the
    deltas add up to the reply."""
    from concurrent.futures import ThreadPoolExecutor

    def converse(message: str) -> tuple[list[dict[str, Any]], Any]:
        with server.client() as http, server.client() as other:
            path = "/agents/shop/messages/stream"
            with http.stream("POST", path, json={"message": message}) as response:
                reader = Frames(response)
                if message.startswith("slow"):
                    return reader.read(), None
                read = reader.read(1)
                while read[-1]["event"]["type"] != "pending:requested":  # the item is logged
                    read += reader.read(1)
                approved = body(other.post(f"/approvals/{read[-1]['event']['id']}/approve"), 200)
                return read + reader.read(), approved

    messages = [f"slow {i}" for i in range(12)] + [f"refund {i}" for i in range(12)]
    with ThreadPoolExecutor(len(messages)) as pool:
        answers = list(pool.map(converse, messages))
    for message, (read, approved) in zip(messages, answers, strict=True):
        events = events_of(read)
        check_full(events, deltas=True)
        sid = events[0]["sessionId"]
        with server.client() as http:
            as_logged(read, logged(http, sid))
        streamed = "".join(e["delta"] for e in events if e["type"] == "text:delta")
        done = events[-1]
        if message.startswith("slow"):
            assert (done["stopReason"], streamed, done["text"]) == ("completed", "z" * 40, "z" * 40)
            continue
        assert done == {
            "type": "done",
            "text": "Done: refunded 5 on A-1",
            "stopReason": "completed",
        }
        assert streamed == "Refunding now.Done: refunded 5 on A-1"
        i = types(events).index("approval:pending")
        assert types(events)[i + 1 : i + 5] == [
            "pending:requested",
            "pending:decided",
            "approval:resolved",
            "actauth:decision",
        ]
        assert (approved["text"], approved["sessionId"]) == (done["text"], sid)
        check_full(approved["events"])
