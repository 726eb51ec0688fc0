"""Large tool results: a result over its call's limit is kept whole by reference, the model
reads a preview (docs/large-results.md).

`over_limit` is what `calls.outcome_of` gives a result longer than the call's `max_output`
(only then: a result within its limit costs nothing here): the content is a note giving its size
and reference, the head and the tail of the text (`PREVIEW` characters in all, at most the
limit); the whole text rides beside it as `Outcome.stored`, a `text/plain` document named by
its SHA-256 that the `tool:output` event carries (`ToolOutput.stored`) and a durable session's
store keeps in its attachment table, in the transaction that appends the event. A result over
`attachments.max_bytes()` is not kept: its head alone is given, as an error (as before).

`reader` is what a call's `ToolContext.results` is: the whole text of a reference this session's
own history names (None for any other), read from the session's store. A session in memory
keeps no store (its `results` is None): the model gets the preview, and `read_result` says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from .. import redact
from ..attachments import Attachment, max_bytes
from ..messages import ToolResultMessage
from ..tools import Outcome

PREVIEW = 4_000
"""Characters of a stored result the model reads: three quarters head, one quarter tail."""

PREFIX = "result:"
"""A reference is `result:` and the SHA-256 of the whole text's UTF-8 bytes."""


def over_limit(
    name: str,
    content: str,
    cap: int,
    is_error: bool,
    terminate: bool,
    images: tuple[Attachment, ...] | None,
) -> Outcome:
    """The outcome of a call whose text is longer than `cap`: a preview and the whole text."""
    data = content.encode()
    if len(data) > max_bytes():
        return Outcome(
            content=f"Tool '{name}' returned {len(content)} characters, over its limit of {cap}. "
            f"The first {cap} characters:\n{redact.head(content, cap)}",
            is_error=True,
        )
    digest = hashlib.sha256(data).hexdigest()
    ref = PREFIX + digest
    room = min(cap, PREVIEW)
    head_n = room * 3 // 4
    head = redact.head(content, head_n)
    tail = redact.tail(content, room - head_n)
    left = len(content) - len(head) - len(tail)
    note = (
        f"[Tool '{name}' returned {len(content)} characters, over its limit of {cap}: the whole "
        f"result is stored as {ref}. Below: its first {len(head)} and last {len(tail)} "
        f"characters. Read any range with read_result(ref, offset, length).]"
    )
    text = f"{note}\n{head}\n[… {left} characters not shown …]\n{tail}"
    stored = Attachment(
        type="document", media_type="text/plain", sha256=digest, size=len(data), name=ref
    )
    return Outcome(
        content=text,
        is_error=is_error,
        terminate=terminate,
        attachments=images,
        stored=stored.with_data(data),
    )


class _Blobs(Protocol):
    async def attachments(self, hashes: Sequence[str]) -> dict[str, bytes]: ...


def reader(session: Any) -> Callable[[str], Awaitable[str | None]] | None:
    """`ToolContext.results` of a call of `session`: None when it keeps no store."""
    log = getattr(session.journal, "log", None)  # (a durable session's `LogJournal`)
    if log is None:
        return None
    return lambda ref: _read(log, session, ref)


async def _read(log: _Blobs, session: Any, ref: str) -> str | None:
    if not ref.startswith(PREFIX) or not _named(session, ref):
        return None
    digest = ref[len(PREFIX) :]
    found = await log.attachments([digest])
    data = found.get(digest)
    return None if data is None else data.decode()


def _named(session: Any, ref: str) -> bool:
    """Whether the session's history (or its open batch) holds a result naming `ref`: one
    session never reads another's (the table is keyed by hash alone)."""
    state = session.state
    results = state.batch.results.values() if state.batch is not None else ()
    messages = [*state.history.messages, *results]
    return any(isinstance(m, ToolResultMessage) and ref in m.content for m in messages)
