"""The values events carry that are not events themselves: the scope of a permission decision,
a budget nudge, the origin of a forwarded subagent event. `loopwright.events` re-exports them
(`ev.Scope`, `ev.Nudge`, `ev.Origin`), so its catalog holds only the event types."""

from __future__ import annotations

from ._values import value


@value
class Scope:
    """The scope a permission decision is made in (SPEC §5.2)."""

    tenant: str
    environment: str
    agent: str


@value
class Nudge:
    """A note asking the model to wrap up, added to one request's context."""

    role: str
    content: str


@value
class Origin:
    """Where a forwarded subagent event came from."""

    agent: str
    session_id: str
    call_id: str
