"""Server-sent events: one frame per event, `event: <type>`, `id: <seq>` (the event's sequence
number in the session's log, so `Last-Event-ID` resumes a stream; token deltas are not logged
and carry no id) and `data: <json>`. A comment line keeps an idle stream open."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .. import events as ev
from ..store import Store
from ..wire import Profile, to_dict
from .runs import LiveRun

KEEPALIVE = ": keep-alive\n\n"


def frame(event: ev.Event, seq: int | None, profile: Profile) -> str | None:
    """The SSE frame of one event, or None when `profile` leaves it out."""
    data = to_dict(event, profile)
    if data is None:
        return None
    lines = [f"event: {data['type']}"]
    if seq is not None:
        lines.append(f"id: {seq}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n\n"


class EventStream(StreamingResponse):
    """A streaming response that stops as soon as the client goes away (Starlette relies on
    the server raising on send, which uvicorn does not): the frames' iterator is cancelled,
    which unsubscribes it; the run itself goes on."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()


def response(frames: AsyncIterator[str]) -> StreamingResponse:
    return EventStream(
        frames,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def live_frames(
    live: LiveRun, profile: Profile, after: int | None = None
) -> AsyncIterator[str]:
    """A live run's frames from its start (or after `after`) until its `done`."""
    async for item in live.follow(after):
        if item is None:
            yield KEEPALIVE
            continue
        text = frame(item.event, item.seq, profile)
        if text is not None:
            yield text


async def replay_frames(
    store: Store,
    tenant: str,
    session_id: str,
    after: int,
    live: LiveRun | None,
    profile: Profile,
) -> AsyncIterator[str]:
    """The session's logged events after `after`; then, when a run of it is live here, that
    run's events until its `done`. The live run (already started) holds the session, so the
    log and the run's own events meet at its first event without a gap or a repeat."""
    stored = store.load(session_id, tenant, after=after)
    upto = live.base if live is not None else None
    last = after
    for item in stored:
        if upto is not None and item.seq > upto:
            break
        last = item.seq
        if item.event.type == "message:partial":  # stored only, never streamed
            continue
        text = frame(item.event, item.seq, profile)
        if text is not None:
            yield text
    if live is not None:
        async for text in live_frames(live, profile, after=last):
            yield text
