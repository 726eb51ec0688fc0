"""A Python client of a loopwright server (`pip install loopwright[client]`), on httpx: `Client`
(sync) and `AsyncClient` (async) — send a message (its whole answer, or its events as a stream
that resumes after a dropped connection from the last seq it took, with `Last-Event-ID`: no
event twice, none missed), decide pending items (approve, edit, deny, answer), and read
sessions, their history (a page at a time), pending items, usage, and fork a session.

Events are the library's own event classes (`loopwright.events`, parsed by `wire.loads`);
a refusal raises a typed `ClientError` with the server's message. It imports none of the
server, the runtime or the store. See docs/clients.md."""

from .aio import AsyncClient, AsyncEventFeed
from .errors import (
    AccessDenied,
    BadRequest,
    ClientError,
    Conflict,
    NotFound,
    RateLimited,
    ServerError,
    StreamDropped,
)
from .sync import Client, EventFeed
from .values import HistoryChunk, Listing, RunAnswer, SessionInfo, WaitingItem

__all__ = [
    "AccessDenied",
    "AsyncClient",
    "AsyncEventFeed",
    "BadRequest",
    "Client",
    "ClientError",
    "Conflict",
    "EventFeed",
    "HistoryChunk",
    "Listing",
    "NotFound",
    "RateLimited",
    "RunAnswer",
    "ServerError",
    "SessionInfo",
    "StreamDropped",
    "WaitingItem",
]
