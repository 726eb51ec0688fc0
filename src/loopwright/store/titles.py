"""A session's title on its row (`title`, schema 7 on SQLite, 6 on PostgreSQL), written once for
both backends as a `sql` program and run by the log whose database holds it (as the outbox is:
`sql_outbox.Runs`).

The title is written once: a row that has one keeps it (the first title stored wins, whichever
process wrote it). It is not an event: nothing replays it, and the session's `updated_at` (the
order sessions are listed in) does not move. A fork copies its source's title with its lineage
(`store.forking`).
"""

from __future__ import annotations

from typing import cast

from .log import SessionKey
from .sql import Dialect, Program, Rows, astuple
from .sql_outbox import Runs

SAVE = (
    "UPDATE {sessions} SET title = ? WHERE tenant = ? AND agent = ? AND name = ? "
    "AND title IS NULL RETURNING id"
)


def save(d: Dialect, key: SessionKey, title: str) -> Program[bool]:
    """Store `title` on the row of `key` unless it has one; whether it was stored (False too for
    an unknown key)."""
    rows = yield Rows(d(SAVE), (title, *astuple(key)))
    return bool(rows)


async def save_title(log: object, key: SessionKey, title: str) -> bool:
    """Store `title` as the title of session `key` of `log` (a `SQLiteLog` or a `PostgresLog`),
    once: False when it had one already (or is unknown)."""
    return await cast(Runs, log)._program(lambda d: save(d, key, title), write=True)
