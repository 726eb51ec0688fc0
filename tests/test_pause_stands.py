"""A cancel that comes after a run decided to pause (while it winds down: late threads, the
run-end hook) has nothing left to stop: the pause stands. Before, the run ended `loop:aborted`
with its asks committed and open — listed open in the log, but a session read from the log had
no checkpoint to resume them with (and the live session kept one the log did not have)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from conftest import call, drive, scripted
from loopwright import Agent, Approval, Hooks, Rules, tool
from loopwright.runtime import open_session
from loopwright.state.replay import continued, fold
from loopwright.store import open_log
from loopwright.store.log import SessionKey

RULES = Rules.from_yaml("""
default_decision: allow
rules:
  - {name: ask-pay, tool: pay, decision: ask}
""")

paid: list[int] = []


@tool
def pay(n: int) -> str:
    """Pay n."""
    paid.append(n)
    return f"paid {n}"


async def test_a_cancel_while_a_paused_run_winds_down_leaves_it_paused_and_resumable(
    tmp_path: Path,
):
    paid.clear()
    ending = asyncio.Event()

    async def on_run_end(info: Any, reason: Any) -> None:
        ending.set()
        await asyncio.Event().wait()  # held until the cancel lands here

    model = scripted({"tool_calls": [call("pay", n=5)]}, "Paid.")
    hooks = Hooks(on_run_end=on_run_end)
    agent = Agent(name="till", model=model, tools=[pay], rules=RULES, hooks=hooks)
    log = await open_log(tmp_path / "db")
    session = await open_session(agent, log, "s1")
    run = session.run("pay five")

    async def cancel_at_the_end() -> None:
        await ending.wait()
        session.cancel()

    canceller = asyncio.create_task(cancel_at_the_end())
    result = await drive(run)
    await canceller
    assert result.stop_reason == "paused"
    assert [e.type for e in result.events][-2:] == ["loop:paused", "done"]

    key = SessionKey("default", "till", "s1")
    [item] = (await log.pending("default")).items
    assert item.status == "open"
    stored = await log.read(key, after=0)
    folded = continued(fold((s.event for s in stored), agent._by_name), died=False)
    assert folded.checkpoint is not None and list(folded.checkpoint.pending) == [item.id]
    assert session.state.checkpoint is not None
    assert list(session.state.checkpoint.pending) == [item.id]

    # the item is resolvable and the session resumable, from the log alone
    again = Agent(name="till", model=model, tools=[pay], rules=RULES)
    fresh = await open_session(again, log, "s1")
    assert [p.id for p in fresh.pending] == [item.id]
    await fresh.resolve(item.id, Approval.approve())
    resumed = await drive(fresh.resume())
    assert (resumed.stop_reason, resumed.text, paid) == ("completed", "Paid.", [5])
    await log.close()
