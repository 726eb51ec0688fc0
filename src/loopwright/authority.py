"""One authority for every decision on a pending item (SPEC §5.3–5.4).

A pending item can be decided by a live approver (a terminal prompt, an in-process callback, a
client holding its stream) and, at the same time, by someone elsewhere (another terminal, HTTP,
a link). Both go through the session's `Authority`: the first decision recorded stands, whoever
made it, and the run continues with that one. `settle` asks the live approver while it waits for
a decision made elsewhere: a prompt overtaken by a decision made elsewhere is cancelled, and an
answer given after another one was recorded changes nothing.

A durable session's authority is its event log (`pending:decided`, single-use in the log's
transaction); a session without a store uses `LocalAuthority`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from .approvals import DEFER, Answer, Approval, Approver, ApproverResult, Request, ask_human

Decided = Approval | Answer


class Authority(Protocol):
    async def record(self, request: Request, decision: Decided) -> Decided:
        """Record `decision` unless the item was decided already; return the one that stands."""
        ...

    async def wait(self, request: Request) -> Decided:
        """The item's decision, once anyone has made it."""
        ...


class LocalAuthority:
    """The authority of a session kept in memory: one future per item."""

    def __init__(self) -> None:
        self._items: dict[str, asyncio.Future[Decided]] = {}

    def _future(self, pending_id: str) -> asyncio.Future[Decided]:
        future = self._items.get(pending_id)
        if future is None:
            future = self._items[pending_id] = asyncio.get_running_loop().create_future()
        return future

    async def record(self, request: Request, decision: Decided) -> Decided:
        future = self._future(request.id)
        if not future.done():
            future.set_result(decision)
        return future.result()

    async def wait(self, request: Request) -> Decided:
        return await asyncio.shield(self._future(request.id))

    def waiting(self, pending_id: str) -> bool:
        """Whether a run waits on this item right now (undecided, asked live)."""
        future = self._items.get(pending_id)
        return future is not None and not future.done()

    def forget(self, pending_id: str) -> None:
        self._items.pop(pending_id, None)


async def settle(
    approver: Approver | None,
    request: Request,
    vet: Callable[[dict[str, Any]], object],
    authority: Authority | None,
) -> ApproverResult:
    """Ask the live approver and wait for a decision made elsewhere; the first recorded wins.

    DEFER when nobody here can answer (no approver, or it defers): the item stays open and the
    caller pauses durably.
    """
    if authority is None:
        return await ask_human(approver, request, vet)
    asking = asyncio.ensure_future(ask_human(approver, request, vet))
    elsewhere = asyncio.ensure_future(authority.wait(request))
    try:
        done, _ = await asyncio.wait({asking, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
        if elsewhere in done:
            return elsewhere.result()
        answer = asking.result()
        if answer is DEFER:
            return DEFER
        assert isinstance(answer, (Approval, Answer))
        return await authority.record(request, answer)
    finally:
        for task in (asking, elsewhere):
            task.cancel()
        await asyncio.wait((asking, elsewhere))  # a prompt overtaken is closed before going on
        for task in (asking, elsewhere):
            if not task.cancelled():
                task.exception()  # retrieved: the one that mattered was raised above
