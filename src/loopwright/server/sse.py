"""Server-sent events: one frame per event, `event: <type>`, `id: <seq>` and `data: <json>`.
The id is the event's sequence number in the session's log, and only ever that of an event the
log holds (committed): token deltas, and events not committed yet when they are sent, carry none,
so `Last-Event-ID` resumes a stream without skipping anything. A comment line keeps an idle
stream open (a held stream waits through a pause for a decision made anywhere)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from .. import events as ev
from ..runtime.follow import Item, batches
from ..wire import Profile, dumps, to_dict

KEEPALIVE = ": keep-alive\n\n"


def frame(event: ev.Event, seq: int | None, profile: Profile) -> str | None:
    """The SSE frame of one event, or None when `profile` leaves it out (v1: a failed run's
    `done` too, its `error` is the stream's last frame)."""
    if profile == "full":  # (serialised once: the JSON the log stores, redacted)
        kind, text = event.type, dumps(event)
    else:
        if isinstance(event, ev.Done) and event.stop_reason == "error":
            return None
        data = to_dict(event, profile)
        if data is None:
            return None
        kind, text = data["type"], json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if seq is None:
        return f"event: {kind}\ndata: {text}\n\n"
    return f"event: {kind}\nid: {seq}\ndata: {text}\n\n"


class EventStream(StreamingResponse):
    """A streaming response that stops as soon as the client goes away (Starlette relies on
    the server raising on send, which uvicorn does not): the frames' iterator is cancelled,
    which stops following the session — the run itself goes on, and pauses durably at its next
    ask once nobody follows it. `on_close` runs however the response ends (even when the
    frames never started). It also ends, cleanly, as the server begins to stop
    (`State.draining`): the client sees the stream's end and may reconnect elsewhere or later
    (`Last-Event-ID`), rather than a connection cut at the shutdown's deadline."""

    def __init__(self, frames: AsyncIterator[str], on_close: Callable[[], None] | None) -> None:
        super().__init__(
            frames,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = ended = drained = False

        async def sending(message: Message) -> None:
            nonlocal started, ended
            started, ended = True, not message.get("more_body", True)
            await send(message)

        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    await self.stream_response(sending)
                    group.cancel_scope.cancel()

                async def drain(draining: asyncio.Event) -> None:
                    nonlocal drained
                    await draining.wait()
                    drained = True
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                if (state := getattr(scope["app"].state, "loopwright", None)) is not None:
                    group.start_soon(drain, state.draining)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
            if drained and not ended:  # (the server stops: end the stream, not cut it)
                if not started:
                    await send(
                        {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if self.on_close is not None:
                self.on_close()


def response(
    items: Callable[[], AsyncIterator[Item]],
    profile: Profile,
    every: float,
    *,
    on_close: Callable[[], None] | None = None,
) -> StreamingResponse:
    """The SSE response of `items()` (made once the response starts), a keep-alive comment
    after `every` seconds of silence; `message:partial` (stored only) is never streamed."""

    async def frames() -> AsyncIterator[str]:  # (what was queued meanwhile: one send)
        async for batch in batches(items(), every):
            if batch is None:
                yield KEEPALIVE
                continue
            texts = [
                text
                for seq, event in batch
                if event.type != "message:partial"
                and (text := frame(event, seq, profile)) is not None
            ]
            if texts:
                yield "".join(texts)

    return EventStream(frames(), on_close)
