"""`GET /lifecycle`: the tenant's lifecycle notifications as SSE, from now on (full profile only).

One frame per notification (`event: session:status`, `data: {...}`, no id: they are not in a
session's log, so there is nothing to resume from; after a reconnect, a session's status is its
stored one, `GET .../sessions/{id}`). `?agent=NAME&session=ID` narrows it to one session. A
comment line keeps an idle stream open; it ends as the server shuts down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response

from ..runtime.follow import batches
from ..state.lifecycle import LifecycleEvent
from ..store.log import SessionKey
from ..wire import dumps
from .sse import KEEPALIVE, EventStream
from .state import state_of
from .views import ApiError, profile_of, tenant_of


async def stream(request: Request) -> Response:
    state = state_of(request)
    if profile_of(request) != "full":
        raise ApiError(404, "lifecycle notifications are on the full profile only")
    tenant = tenant_of(request)
    agent, session = request.query_params.get("agent"), request.query_params.get("session")
    if (agent is None) != (session is None):
        raise ApiError(400, "agent and session go together (one session's notifications)")
    key = None if agent is None or session is None else SessionKey(tenant, agent, session)
    subscription = state.runtime.lifecycle(tenant, key)
    places = state.places(tenant, stream=True)

    async def frames() -> AsyncIterator[str]:
        events: AsyncIterator[LifecycleEvent] = subscription
        async for batch in batches(events, state.settings.keepalive):
            yield KEEPALIVE if batch is None else "".join(frame(e) for e in batch)

    return EventStream(frames(), places.on_close(subscription.close))


def frame(event: LifecycleEvent) -> str:
    return f"event: {event.type}\ndata: {dumps(event)}\n\n"
