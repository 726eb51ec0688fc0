"""`AsyncClient`: the asynchronous client (httpx), the same operations as `Client`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx

from .. import events as ev
from ..messages import Message
from . import calls, values
from .calls import JSON_HEADERS, SSE_HEADERS, HttpCall, checked
from .errors import NotFound, StreamDropped
from .feed import FrameReader, Position

log = logging.getLogger("loopwright.client")


class AsyncClient:
    """`Client`, awaited: see it for the arguments and each operation."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        reconnects: int = 5,
        retry_delay: float = 0.5,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout, read=None)
        )
        self.reconnects, self.retry_delay = reconnects, retry_delay

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, call: HttpCall) -> Any:
        answer = await self.http.request(
            call.method, call.path, json=call.body, params=call.params, headers=JSON_HEADERS
        )
        return checked(answer.status_code, answer.content)

    async def send(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> values.RunAnswer:
        return values.run_answer(await self._call(calls.send(agent, message, session_id, settings)))

    async def stream(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> AsyncEventFeed:
        call = calls.send(agent, message, session_id, settings, stream=True)
        after = 0 if session_id is None else await self._last_seq(agent, session_id)
        return AsyncEventFeed(self, agent, Position(session_id, after), call)

    def events(self, agent: str, session_id: str, *, after: int = 0) -> AsyncEventFeed:
        return AsyncEventFeed(self, agent, Position(session_id, after), None)

    async def _last_seq(self, agent: str, session_id: str) -> int:
        try:
            return int((await self.session(agent, session_id, limit=1)).last_seq)
        except NotFound:
            return 0

    async def approve(
        self, item_id: str, *, args: dict[str, Any] | None = None
    ) -> values.RunAnswer:
        return values.run_answer(await self._call(calls.decide(item_id, "approve", args=args)))

    async def edit(self, item_id: str, args: dict[str, Any]) -> values.RunAnswer:
        return await self.approve(item_id, args=args)

    async def deny(self, item_id: str, *, reason: str | None = None) -> values.RunAnswer:
        return values.run_answer(await self._call(calls.decide(item_id, "deny", reason=reason)))

    async def answer(self, item_id: str, text: str) -> values.RunAnswer:
        return values.run_answer(await self._call(calls.decide(item_id, "answer", answer=text)))

    async def session(
        self, agent: str, session_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> values.HistoryChunk:
        data = await self._call(calls.session(agent, session_id, limit, cursor))
        return values.history_chunk(data)

    async def history(
        self, agent: str, session_id: str, *, page_size: int = 100
    ) -> AsyncIterator[Message]:
        pages: list[list[Message]] = []
        cursor = None
        while True:
            chunk = await self.session(agent, session_id, limit=page_size, cursor=cursor)
            pages.append(chunk.messages)
            if (cursor := chunk.next_cursor) is None:
                break
        for messages in reversed(pages):
            for message in messages:
                yield message

    async def sessions(
        self, agent: str, *, limit: int | None = None, cursor: str | None = None
    ) -> values.Listing[values.SessionInfo]:
        return values.sessions_page(await self._call(calls.sessions(agent, limit, cursor)))

    async def pending(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> values.Listing[values.WaitingItem]:
        return values.items_page(await self._call(calls.pending(limit, cursor)))

    async def usage(
        self, *, by: str | None = None, agent: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        return dict(await self._call(calls.usage(by, agent, session_id)))

    async def fork(
        self, agent: str, session_id: str, *, at: int | None = None, new_id: str | None = None
    ) -> values.SessionInfo:
        data = await self._call(calls.fork(agent, session_id, at, new_id))
        return values.session_info(data)


class AsyncEventFeed:
    """`EventFeed`, iterated with `async for` (once); `aclose()` closes its connection."""

    def __init__(
        self, client: AsyncClient, agent: str, position: Position, first: HttpCall | None
    ) -> None:
        self.client, self.agent, self.position, self._first = client, agent, position, first
        self._response: httpx.Response | None = None

    async def __aiter__(self) -> AsyncIterator[ev.Event]:
        failures, resumed = 0, self._first is None
        while True:
            took = False
            try:
                self._response = await self._open()
                reader = FrameReader()
                async for line in self._response.aiter_lines():
                    frame = reader.line(line)
                    if frame is not None and (event := self.position.take(*frame)) is not None:
                        took, failures = True, 0
                        yield event
                if self.position.finished or (resumed and not took):
                    return
            except httpx.TransportError as exc:
                failures += 1
                log.info("stream of %s dropped (%s): resuming", self.agent, exc)
            finally:
                await self.aclose()
            if self.position.session_id is None:
                raise StreamDropped("the stream dropped before its session was known")
            if failures > self.client.reconnects:
                raise StreamDropped(f"the stream could not be resumed ({failures} failures)")
            if failures > 1:
                await asyncio.sleep(self.client.retry_delay)  # (a retry's back-off)
            resumed = True

    async def _open(self) -> httpx.Response:
        first, self._first = self._first, None
        position = self.position
        if first is None:
            assert position.session_id is not None
            first = calls.follow(self.agent, position.session_id, position.last_seq)
        headers = dict(SSE_HEADERS)
        if position.last_seq and first.method == "GET":
            headers["Last-Event-ID"] = str(position.last_seq)
        http = self.client.http
        request = http.build_request(
            first.method, first.path, json=first.body, params=first.params, headers=headers
        )
        response = await http.send(request, stream=True)
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            checked(response.status_code, response.content)
        return response

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()
            self._response = None
