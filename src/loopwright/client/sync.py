"""`Client`: the synchronous client (httpx). See `loopwright.client`."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx

from .. import events as ev
from ..messages import Message
from . import calls, values
from .calls import JSON_HEADERS, SSE_HEADERS, HttpCall, checked
from .errors import NotFound, StreamDropped
from .feed import FrameReader, Position

log = logging.getLogger("loopwright.client")
DROPPED = (httpx.TransportError,)
"""What a dropped connection raises mid-stream (or a refused one on reconnecting)."""


class Client:
    """A loopwright server's client. `token`: the bearer token (a tenant's); `reconnects`: how
    many times in a row a stream may fail to resume before it raises `StreamDropped` (waiting
    `retry_delay` seconds between failures after the first)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        reconnects: int = 5,
        retry_delay: float = 0.5,
        http: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.Client(
            base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout, read=None)
        )
        self.reconnects, self.retry_delay = reconnects, retry_delay

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _call(self, call: HttpCall) -> Any:
        answer = self.http.request(
            call.method, call.path, json=call.body, params=call.params, headers=JSON_HEADERS
        )
        return checked(answer.status_code, answer.content)

    def send(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> values.RunAnswer:
        """Send a message; the run's answer once it ends or pauses on a decision."""
        return values.run_answer(self._call(calls.send(agent, message, session_id, settings)))

    def stream(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> EventFeed:
        """Send a message and iterate over the run's events as they come, through pauses (a
        decision made anywhere lets it go on) up to its final `done`; a dropped connection is
        resumed from the last seq (`Last-Event-ID`)."""
        call = calls.send(agent, message, session_id, settings, stream=True)
        after = 0 if session_id is None else self._last_seq(agent, session_id)
        return EventFeed(self, agent, Position(session_id, after), call)

    def events(self, agent: str, session_id: str, *, after: int = 0) -> EventFeed:
        """A session's events after seq `after`, then its runs as they go, up to a final
        `done` (resumed as `stream` is)."""
        return EventFeed(self, agent, Position(session_id, after), None)

    def _last_seq(self, agent: str, session_id: str) -> int:
        try:
            return int(self.session(agent, session_id, limit=1).last_seq)
        except NotFound:
            return 0

    def approve(self, item_id: str, *, args: dict[str, Any] | None = None) -> values.RunAnswer:
        """Approve a pending call (with `args`: edited arguments); the run's answer."""
        return values.run_answer(self._call(calls.decide(item_id, "approve", args=args)))

    def edit(self, item_id: str, args: dict[str, Any]) -> values.RunAnswer:
        """Approve a pending call with edited arguments (merged into the call's)."""
        return self.approve(item_id, args=args)

    def deny(self, item_id: str, *, reason: str | None = None) -> values.RunAnswer:
        return values.run_answer(self._call(calls.decide(item_id, "deny", reason=reason)))

    def answer(self, item_id: str, text: str) -> values.RunAnswer:
        return values.run_answer(self._call(calls.decide(item_id, "answer", answer=text)))

    def session(
        self, agent: str, session_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> values.HistoryChunk:
        """A session: its history (all of it, or the newest `limit` messages before `cursor`),
        what it waits on and its usage."""
        return values.history_chunk(self._call(calls.session(agent, session_id, limit, cursor)))

    def history(self, agent: str, session_id: str, *, page_size: int = 100) -> Iterator[Message]:
        """Every message of a session, oldest first, read a page at a time (newest first)."""
        pages: list[list[Message]] = []
        cursor = None
        while True:
            chunk = self.session(agent, session_id, limit=page_size, cursor=cursor)
            pages.append(chunk.messages)
            if (cursor := chunk.next_cursor) is None:
                break
        for messages in reversed(pages):
            yield from messages

    def sessions(
        self, agent: str, *, limit: int | None = None, cursor: str | None = None
    ) -> values.Listing[values.SessionInfo]:
        return values.sessions_page(self._call(calls.sessions(agent, limit, cursor)))

    def pending(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> values.Listing[values.WaitingItem]:
        """One page of every open approval and question of the tenant."""
        return values.items_page(self._call(calls.pending(limit, cursor)))

    def usage(
        self, *, by: str | None = None, agent: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """`GET /usage` as the server answers it (groups of tokens and cost)."""
        return dict(self._call(calls.usage(by, agent, session_id)))

    def fork(
        self, agent: str, session_id: str, *, at: int | None = None, new_id: str | None = None
    ) -> values.SessionInfo:
        """A new session whose history is this one's up to seq `at`."""
        return values.session_info(self._call(calls.fork(agent, session_id, at, new_id)))


class EventFeed:
    """A stream's events (iterate once); `position` says where it stands (its session and last
    seq). Closing it (or leaving the loop) closes the connection."""

    def __init__(self, client: Client, agent: str, position: Position, first: HttpCall | None):
        self.client, self.agent, self.position, self._first = client, agent, position, first
        self._response: httpx.Response | None = None

    def __iter__(self) -> Iterator[ev.Event]:
        failures, resumed = 0, self._first is None
        while True:
            took = False
            try:
                self._response = self._open()
                reader = FrameReader()
                for line in self._response.iter_lines():
                    frame = reader.line(line)
                    if frame is not None and (event := self.position.take(*frame)) is not None:
                        took, failures = True, 0
                        yield event
                if self.position.finished or (resumed and not took):
                    return  # the run ended for good, or the session has nothing more
            except DROPPED as exc:
                failures += 1
                log.info("stream of %s dropped (%s): resuming", self.agent, exc)
            finally:
                self.close()
            if self.position.session_id is None:
                raise StreamDropped("the stream dropped before its session was known")
            if failures > self.client.reconnects:
                raise StreamDropped(f"the stream could not be resumed ({failures} failures)")
            if failures > 1:
                time.sleep(self.client.retry_delay)  # (a retry's back-off, not a synchronisation)
            resumed = True

    def _open(self) -> httpx.Response:
        first, self._first = self._first, None
        position = self.position
        if first is None:
            assert position.session_id is not None
            first = calls.follow(self.agent, position.session_id, position.last_seq)
        headers = dict(SSE_HEADERS)
        if position.last_seq and first.method == "GET":  # (resuming: the session's stream)
            headers["Last-Event-ID"] = str(position.last_seq)
        http = self.client.http
        request = http.build_request(
            first.method, first.path, json=first.body, params=first.params, headers=headers
        )
        response = http.send(request, stream=True)
        if response.status_code >= 400:
            response.read()
            response.close()
            checked(response.status_code, response.content)
        return response

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None
