"""One durable session, for a script: a `Session` whose runs are kept in an event log.

    log = await open_log()
    session = await open_session(agent, log, "order-1001", tenant="acme")
    result = await session.run("where is my parcel?").result()

It is driven as an in-memory session is (`run`, `pending`, `resolve`, `resume`, `steer`,
`cancel`), and another process opens it again from the log. A service with many sessions, or
one whose runs must go on while it answers others, uses a `Runtime` instead.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

from ..agent import Agent
from ..loop.session import Session
from ..store.log import SessionKey, Store
from . import journal
from .approvers import racing
from .journal import Settings


async def open_session(
    agent: Agent,
    log: Store,
    session_id: str | None = None,
    *,
    tenant: str = "default",
    environment: str | None = None,
    settings: Settings | None = None,
) -> Session:
    """The session `session_id` of `agent` under `tenant` as the log leaves it (a new one when
    the id is unused, or None: a fresh id). A run claims it under a lease (`settings.ttl`
    seconds, renewed while it runs): while a run here or in another process holds it, a second
    run fails with `SessionBusy`; the lease of a process that died expires, and the next run
    takes the session over and recovers what the dead run left."""
    if settings is None:
        settings = Settings(environment=environment)
    elif environment is not None:
        settings = replace(settings, environment=environment)
    key = SessionKey(tenant, agent.name, session_id or secrets.token_hex(16))
    return await journal.session_in_log(log, agent, key, settings, live_approver=racing(None))
