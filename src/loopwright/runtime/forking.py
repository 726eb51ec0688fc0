"""Fork a stored session: a new session whose history is another's up to a seq, for every door.

    key = await fork(runtime, SessionKey("acme", "support", "order-1001"), at=12)
    run = await runtime.send(key.tenant, key.agent, key.id, "what if I had said no?")

The new session's log is a copy of the source's events 1..`at` (the last one by default), made
in one transaction by the store (`store.forking`: the copy, fresh pending ids, no usage billed
twice, the lineage on its row); the source is untouched. It then runs like any session: a fork
whose copy ends at a run's `done` goes on from there (an approval left open is open in the fork,
to decide as it pleases: "what if I had denied?"); one whose copy ends inside a run is recovered
on its next run as a run that died there (a call started without its result is `interrupted`,
never run again: P3). Forks stay in their source's tenant and agent; a foreign source is unknown.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from ..state.lifecycle import ForkSource
from ..store.forking import CannotFork
from ..store.log import SESSION_ID_RULE, SessionKey, SessionRecord, valid_session_id

if TYPE_CHECKING:
    from .service import Runtime

__all__ = ["CannotFork", "fork", "lineage"]


async def fork(
    runtime: Runtime, key: SessionKey, *, at: int | None = None, new_id: str | None = None
) -> SessionKey:
    """Fork session `key` at seq `at` (default: its last) as `new_id` (default: a fresh id);
    returns the new session's key. `UnknownSession` for an unknown or foreign `key`;
    `CannotFork` for a seq out of range, an id in use or not a valid id."""
    if new_id is not None and not valid_session_id(new_id):
        raise CannotFork(f"session id {new_id!r} is not valid: {SESSION_ID_RULE}", "id")
    if at is None:
        at = (await runtime.session(key)).last_seq
    forked = await runtime.log.fork(key, at, new_id or secrets.token_hex(16))
    runtime.live.lifecycle.created(forked, ForkSource(session_id=key.id, seq=at))
    return forked


def lineage(record: SessionRecord) -> dict[str, object] | None:
    """A session's lineage as the doors show it: `{"session": id, "seq": n}`, None unless a fork."""
    source = record.forked_from
    return None if source is None else {"session": source.session, "seq": source.seq}
