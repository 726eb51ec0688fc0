"""A model API served on a Unix socket by the test's own event loop, for what a separate fake
server cannot do on cue: answer the n-th request with a streamed body and then end it, stall it
for as long as the test runs, or cut the connection when the test says so (once it has seen the
client read what came before).

    async with LocalAPI(tmp_path, [Answer(body, then="stall"), Answer(body)]) as api:
        model = make_model(endpoint, name, http_client=api.client())
        ...
    api.requests      # the JSON body of every request, in order

On virtual time (tests/virtual_time.py) a stalled answer meets the client's timeout the moment
everything waits: the timeout is real (httpx's), the wait is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
)


@dataclass
class Answer:
    """The streamed body of one response, and what happens after it: `end` the response,
    `stall` (send nothing more), or an `asyncio.Event`: cut the connection once it is set."""

    body: bytes
    then: Literal["end", "stall"] | asyncio.Event = "end"


class LocalAPI:
    def __init__(self, tmp: Path, answers: list[Answer]) -> None:
        self.path = tmp / "api.sock"
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self.handlers: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None
        self.closing = asyncio.Event()

    async def __aenter__(self) -> LocalAPI:
        self.server = await asyncio.start_unix_server(self._serve, self.path)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        self.closing.set()  # stalled answers end, and unfinished ones are cut
        for answer in self.answers:
            if isinstance(answer.then, asyncio.Event):
                answer.then.set()
        await asyncio.gather(*self.handlers)
        await self.server.wait_closed()

    def client(self) -> httpx2.AsyncClient:
        """An HTTP client whose every connection goes to this API (any base URL)."""
        return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(self.path)))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length: *(\d+)", head)
            body = await reader.readexactly(int(length[1]) if length else 0)
            self.requests.append(json.loads(body))
            answer = self.answers[len(self.requests) - 1]
            writer.write(HEAD + b"%x\r\n%s\r\n" % (len(answer.body), answer.body))
            if answer.then == "end":
                writer.write(b"0\r\n\r\n")
            elif answer.then == "stall":
                await self.closing.wait()  # until the test ends
            else:
                await answer.then.wait()  # then cut: the chunked body is never finished
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            self.handlers.discard(task)
            writer.close()
