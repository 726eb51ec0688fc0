"""Session titles, for people: the sessions list (`title`) shows them first, the id second.

A session's title is the one a model wrote for it, stored on its row (`runtime.titling`, when
`[titles]` is configured), else its first user message (its first `input:received`), on one line
and cut to `TITLE_CHARS` characters. The first message is derived from the log each time it is
listed, so every backend, every fork (whose log begins with its source's) and every old session
has one. A session whose first events hold no input (none yet) has none: null. Every door
(the HTTP API and so the playground, `loopwright sessions`) titles sessions here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .. import events as ev
from ..store.log import SessionRecord

if TYPE_CHECKING:
    from .reading import Reading

TITLE_CHARS = 80
FIRST_EVENTS = 8
"""Events read from a log's start to find its first input (it is the second: after `session`)."""


def title_of(events: Iterable[ev.Event]) -> str | None:
    """The title the first `input:received` among `events` gives (None without one, or when
    its text is blank: a message of attachments only)."""
    for event in events:
        if isinstance(event, ev.InputReceived):
            return clip(event.message.content) or None
    return None


def clip(text: str, limit: int = TITLE_CHARS) -> str:
    """`text` on one line (runs of white space made one space), at most `limit` characters
    (cut at a word when one ends near the limit, with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if flat[len(cut)] != " " and space >= limit // 2:  # (a word goes on past the cut)
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


async def titles(runtime: Reading, records: Sequence[SessionRecord]) -> list[str | None]:
    """The title of each session of `records`, in their order: its stored one, else its first
    message's (read from its log)."""

    async def one(record: SessionRecord) -> str | None:
        if record.title is not None:
            return record.title
        stored = await runtime.read(record.key, limit=FIRST_EVENTS)
        return title_of(s.event for s in stored)

    return list(await asyncio.gather(*(one(record) for record in records)))
