"""A session's large tool results, as the doors read them (docs/large-results.md).

`stored_result` is the whole text a session's `tool:output` stored by reference
(`loop.stored`): the reference must be one of that session's own events (the attachment table is
keyed by hash alone, so a reference alone proves nothing), read a page of events at a time.
"""

from __future__ import annotations

from .. import events as ev
from ..loop.stored import PREFIX
from ..store.log import SessionKey, Store

PAGE = 1000


async def stored_result(log: Store, key: SessionKey, ref: str) -> str | None:
    """The whole text `ref` names, if the session `key` stored it; else None."""
    digest = ref.removeprefix(PREFIX)
    if not ref.startswith(PREFIX) or not await _names(log, key, digest):
        return None
    data = (await log.attachments([digest])).get(digest)
    return None if data is None else data.decode()


async def _names(log: Store, key: SessionKey, digest: str) -> bool:
    after = 0
    while True:
        page = await log.read(key, after=after, limit=PAGE)
        for item in page:
            event = item.event
            stored = event.stored if isinstance(event, ev.ToolOutput) else None
            if stored is not None and stored.sha256 == digest:
                return True
        if len(page) < PAGE:
            return False
        after = page[-1].seq
