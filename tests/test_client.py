"""The Python client (`loopwright.client`) against a real server on loopback (uvicorn,
`live_server`): send, stream with a decision while the run is held at an approval, a stream
resumed after its connection is cut mid-run (a proxy we control: `cutting_proxy`), history a
page at a time, pending items, sessions, usage, fork, and the server's refusals as typed
errors — sync and async. Every stream is checked against the session's log: the events the
client gave are exactly those the log holds (no event twice, none missed)."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cutting_proxy import cutting
from live_server import LiveServer, serving
from loopwright import events as ev
from loopwright.client import AsyncClient, Client, Conflict, NotFound, StreamDropped
from loopwright.client.feed import DELTAS, Position
from loopwright.messages import AssistantMessage, ToolResultMessage, UserMessage
from loopwright.wire import dumps, loads

REFUND_TYPES = [
    *("session", "input:received", "step:started", "budget:check", "text:delta", "tool:delta"),
    *("tool:delta", "message:completed", "assistant:text", "approval:pending"),
    *("pending:requested", "pending:decided", "approval:resolved", "actauth:decision"),
    *("tool:started", "toollane:result", "tool:output", "tool:result", "step:finished"),
    *("step:started", "budget:check", "text:delta", "text:delta", "message:completed"),
    *("step:finished", "loop:done", "done"),
]
"""A held stream of `refund now` approved while it waits: every event, deltas too."""
DONE = "Done: refunded 5 on A-1"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory.mktemp("client") / "shop") as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[Client]:
    with Client(server.url) as c:
        yield c


def logged(server: LiveServer, session_id: str, after: int = 0) -> list[ev.Event]:
    """The session's log after `after` as the server stores it (a plain read, not the client)."""
    with server.client() as http:
        got = http.get(f"/agents/shop/sessions/{session_id}/events?after={after}&limit=500")
    assert got.status_code == 200 and got.json()["more"] is False
    events = [e["event"] for e in got.json()["events"]]
    return [loads(e) for e in events if e["type"] != "message:partial"]


def stored(events: list[ev.Event]) -> list[ev.Event]:
    return [e for e in events if e.type not in DELTAS]


def test_send_answers_with_typed_events_and_the_history_reads_in_pages(client: Client) -> None:
    first = client.send("shop", "hello")
    assert (first.text, first.stop_reason, first.waiting) == ("heard: hello", "completed", None)
    assert first.events[0] == ev.Session(session_id=first.session_id)
    assert first.events[-1] == ev.Done(text="heard: hello", stop_reason="completed")
    sid = first.session_id
    second = client.send("shop", "again", session_id=sid)
    assert second.text == "heard: hello | again"

    whole = client.session("shop", sid)
    assert (whole.status, whole.waiting, whole.next_cursor) == ("idle", [], None)
    assert whole.title == "hello"  # (no [titles]: the first message)
    assert [type(m) for m in whole.messages] == [UserMessage, AssistantMessage] * 2
    assert whole.messages[0] == UserMessage(content="hello")
    page = client.session("shop", sid, limit=1)
    assert (page.start, page.length, page.messages) == (3, 4, whole.messages[3:])
    assert page.next_cursor is not None
    assert list(client.history("shop", sid, page_size=1)) == whole.messages  # four pages
    assert whole.usage["requests"] == 2
    listed = client.sessions("shop", limit=50).items
    assert sid in [s.id for s in listed]
    usage = client.usage(by="session", agent="shop", session_id=sid)
    assert [g["requests"] for g in usage["groups"]] == [2]


def test_a_stream_goes_on_through_a_decision_made_while_it_is_held(
    client: Client, server: LiveServer
) -> None:
    feed = client.stream("shop", "refund now")
    seen: list[ev.Event] = []
    for event in feed:
        seen.append(event)
        if isinstance(event, ev.ApprovalPending):
            (item,) = [i for i in client.pending().items if i.id == event.id]
            assert (item.kind, item.tool, item.args) == ("approval", "refund", event.args)
            assert item.session_id == feed.position.session_id
            decided = client.approve(event.id)  # the run goes on in the held stream
            assert (decided.stop_reason, decided.text) == ("completed", DONE)
    assert [e.type for e in seen] == REFUND_TYPES
    assert seen[-1] == ev.Done(text=DONE, stop_reason="completed")
    assert feed.position.session_id is not None
    assert stored(seen) == logged(server, feed.position.session_id)
    assert [i for i in client.pending().items if i.session_id == feed.position.session_id] == []


def test_a_stream_cut_while_held_at_an_approval_resumes_exactly(
    client: Client, server: LiveServer
) -> None:
    """The connection is cut as the approval arrives, then the call is approved elsewhere: the
    stream reconnects with `Last-Event-ID` and gives exactly the log's events (the run paused
    once nobody held it, and went on when approved)."""
    with cutting(server.url) as proxy, Client(proxy.url) as through:
        feed = through.stream("shop", "refund now")
        seen: list[ev.Event] = []
        for event in feed:
            seen.append(event)
            if isinstance(event, ev.ApprovalPending):
                proxy.cut()
                answer = client.approve(event.id)  # (directly, not through the proxy)
                assert answer.stop_reason in ("completed", None)
        assert (proxy.cuts, proxy.connections) == (1, 2)  # the stream, and its resumption
    sid = feed.position.session_id
    assert sid is not None
    assert stored(seen) == logged(server, sid)
    assert seen[-1] == ev.Done(text=DONE, stop_reason="completed")
    assert feed.position.last_seq == client.session("shop", sid).last_seq


@pytest.mark.parametrize("existing", [False, True])
def test_a_stream_cut_while_the_model_replies_resumes_exactly(
    client: Client, server: LiveServer, existing: bool
) -> None:
    """Cut while the model's reply is held (nothing can be buffered past the cut): the run goes
    on unheld, and the resumed stream gives the rest, each event once — in a new session, or
    in one with earlier runs (the stream starts after the session's last seq)."""
    before = client.send("shop", "earlier") if existing else None
    sid = before.session_id if before is not None else None
    start = client.session("shop", sid).last_seq if sid is not None else 0
    with server.hold("wait for me") as release, cutting(server.url) as proxy:
        with Client(proxy.url) as through:
            feed = through.stream("shop", "wait for me", session_id=sid)
            seen: list[ev.Event] = []
            for event in feed:
                seen.append(event)
                if event.type == "budget:check" and proxy.cuts == 0:
                    proxy.cut()
                    release()
        assert (proxy.cuts, proxy.connections) == (1, 2)
    sid = feed.position.session_id
    assert sid is not None
    assert stored(seen) == logged(server, sid, after=start)
    said = "heard: earlier | wait for me" if existing else "heard: wait for me"
    assert seen[-1] == ev.Done(text=said, stop_reason="completed")


def test_a_resumed_stream_drops_what_it_took_before_the_log_held_it() -> None:
    """Events sent before their commit come without a seq, and again with it after a resume:
    the second time is dropped; an event with a new seq after them clears them."""
    resolved = ev.ApprovalResolved(
        id="apr_1", tool="refund", decision="approve", by="ana", resolved_at="2026-01-01T00:00Z"
    )
    verdict = ev.ActauthDecision(tool="refund", decision="allow", reason="approved")
    started = ev.StepStarted(step=2)
    position = Position("s1", 0)
    assert position.take(9, dumps(ev.StepStarted(step=1))) is not None
    assert position.take(None, dumps(resolved)) == resolved
    assert position.take(None, dumps(ev.TextDelta(delta="x"))) == ev.TextDelta(delta="x")
    assert position.take(None, dumps(verdict)) == verdict
    # the connection drops; resumed after seq 9:
    assert position.take(10, dumps(resolved)) is None
    assert position.take(11, dumps(verdict)) is None
    assert position.take(12, dumps(started)) == started
    assert position.take(12, dumps(started)) is None  # (a seq already taken)
    assert (position.last_seq, position.unconfirmed, position.finished) == (12, [], False)
    position.take(None, dumps(verdict))
    assert position.take(13, dumps(started)) == started and position.unconfirmed == []
    assert position.take(14, dumps(ev.Done(text="", stop_reason="paused"))) is not None
    assert not position.finished
    position.take(15, dumps(ev.Done(text="", stop_reason="completed")))
    assert position.finished


def test_a_question_is_answered_and_a_denial_carries_its_reason(client: Client) -> None:
    asked = client.send("shop", "ask me")
    assert asked.stop_reason == "paused" and asked.waiting is not None
    item = asked.waiting
    assert (item.kind, item.question, item.options) == (
        "question",
        "Which colour?",
        ["red", "blue"],
    )
    answered = client.answer(item.id, "blue")
    assert (answered.stop_reason, answered.text) == ("completed", "Done: blue")
    again = client.answer(item.id, "red")  # a second decision: said, not an error
    assert again.already_resolved and again.session_id == asked.session_id

    paused = client.send("shop", "refund please")
    assert paused.waiting is not None and paused.waiting.tool == "refund"
    with pytest.raises(Conflict) as busy:
        client.send("shop", "more", session_id=paused.session_id)
    assert busy.value.status == 409
    assert busy.value.message == (
        f"session {paused.session_id} is paused on pending items ({paused.waiting.id}): "
        "approve, deny or answer them first"
    )
    denied = client.deny(paused.waiting.id, reason="not today")
    assert denied.stop_reason == "denied"
    (result,) = [
        m
        for m in client.session("shop", paused.session_id).messages
        if isinstance(m, ToolResultMessage)
    ]
    assert result.is_error and "not today" in result.content


def test_an_edit_approves_with_the_edited_arguments(client: Client) -> None:
    paused = client.send("shop", "refund it")
    assert paused.waiting is not None
    done = client.edit(paused.waiting.id, {"amount": 2})
    assert (done.stop_reason, done.text) == ("completed", "Done: refunded 2 on A-1")


def test_refusals_are_typed_errors_with_the_servers_message(client: Client) -> None:
    with pytest.raises(NotFound) as unknown:
        client.approve("apr_nothing")
    assert unknown.value.message == (
        "No pending approval 'apr_nothing' (already decided, timed out, or never existed)."
    )
    with pytest.raises(NotFound) as agent:
        client.send("nobody", "hi")
    assert agent.value.status == 404 and "nobody" in agent.value.message
    with pytest.raises(NotFound):
        list(client.events("shop", "no-such-session"))


def test_a_fork_starts_from_the_session_and_a_follower_reads_it(client: Client) -> None:
    first = client.send("shop", "one")
    forked = client.fork("shop", first.session_id, new_id="forked-one")
    assert (forked.id, forked.agent, forked.status) == ("forked-one", "shop", "idle")
    assert forked.forked_from is not None and forked.forked_from["session"] == first.session_id
    assert client.send("shop", "two", session_id="forked-one").text == "heard: one | two"
    followed = list(client.events("shop", first.session_id))  # an ended session: its log
    assert followed[0] == ev.Session(session_id=first.session_id)
    assert followed[-1] == ev.Done(text="heard: one", stop_reason="completed")


def test_a_stream_that_drops_before_its_session_is_known_says_so() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there: the stream never starts
    with (
        Client(url, reconnects=0) as through,
        pytest.raises(StreamDropped, match="before its session was known"),
    ):
        list(through.stream("shop", "hello"))


def test_the_async_client_streams_decides_and_resumes(server: LiveServer) -> None:
    async def scenario() -> tuple[list[ev.Event], str | None, Any]:
        with cutting(server.url) as proxy:
            async with AsyncClient(proxy.url) as through, AsyncClient(server.url) as direct:
                feed = await through.stream("shop", "refund now")
                seen: list[ev.Event] = []
                async for event in feed:
                    seen.append(event)
                    if isinstance(event, ev.ApprovalPending):
                        listed = (await direct.pending()).items
                        assert event.id in [i.id for i in listed]
                        proxy.cut()
                        await direct.approve(event.id)
                history = await direct.session("shop", feed.position.session_id or "")
                return seen, feed.position.session_id, (proxy.connections, history)

    seen, sid, (connections, history) = asyncio.run(scenario())
    assert sid is not None and connections == 2
    assert stored(seen) == logged(server, sid)
    assert [type(m) for m in history.messages] == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
    ]


def test_the_client_loads_neither_the_server_nor_the_runtime() -> None:
    from test_lazy_imports import loaded

    found, _ = loaded("import loopwright.client")
    assert [m for m in found if m.startswith(("loopwright.server", "loopwright.runtime"))] == []
    assert "starlette" not in found and "uvicorn" not in found and "httpx" in found
    assert "loopwright.store.log" not in found


def test_httpx_is_the_only_transport(server: LiveServer) -> None:
    """A caller's own httpx client (its transport, its headers) is used as it is."""
    seen: list[str] = []
    http = httpx.Client(
        base_url=server.url, event_hooks={"request": [lambda r: seen.append(r.url.path)]}
    )
    with Client(server.url, http=http) as c:
        assert c.send("shop", "hi").text == "heard: hi"
    assert seen == ["/agents/shop/messages"]
    assert Path(__file__).name == "test_client.py"


def test_the_docs_python_examples_run_as_shown(server: LiveServer) -> None:
    """docs/clients.md's examples, run against the server: the sync one prints what the page
    shows; the async one prints the refund's answer."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "clients.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", doc, re.S)
    python = [code for lang, code in blocks if lang == "python"]
    shown = next(code for lang, code in blocks if lang == "text")
    outputs = []
    for code in python:
        out = subprocess.run(
            [sys.executable, "-c", code.replace("http://127.0.0.1:8787", server.url)],
            capture_output=True,
            text=True,
            timeout=120,  # a safety net
            check=False,
        )
        assert (out.returncode, out.stderr) == (0, "")
        outputs.append(out.stdout)
    assert outputs == [shown, DONE + "\n"]
