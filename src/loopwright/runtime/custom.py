"""An app's custom message put in a durable session's history between runs (`message:custom`):
what `POST /agents/{name}/sessions/{id}/messages` does, and what a program holding a `Runtime`
calls. It is logged under a lease of its own, like what is logged for a session's next run
(`controls.log_for_next_run`), so it is in the log before this returns (P1), and every reader
of the log — a session opened again, a snapshot, a fork, a replay — has it in the history. The
model sees it only through the agent's `convert` hook (`loop.conversion`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import events as ev
from ..messages import CustomMessage
from ..store import SessionStatus
from ..store.log import SessionKey

if TYPE_CHECKING:
    from .service import Runtime


async def add_custom(runtime: Runtime, key: SessionKey, message: CustomMessage) -> int:
    """Log `message` in the session's history; returns its event's seq. `UnknownSession` for
    an unknown (or another tenant's) session, `SessionBusy` while a run holds it (here or in
    another process: a custom message joins the history between runs)."""
    runtime.live.check_idle(key)
    log = runtime.log
    record = await log.session(key)
    status: SessionStatus = "paused" if record.status == "paused" else "idle"
    claimed = await log.claim(key, runtime.settings.owner, ttl=runtime.settings.lease_seconds)
    try:
        return await log.append(claimed.lease, [ev.MessageCustom(message=message)])
    finally:
        await log.release(claimed.lease, "interrupted" if claimed.died else status)
