"""A worker process for the crash test of pending items (test_crash_pending.py).

usage: python pending_agent.py DB STEP [MESSAGE]
  run MESSAGE      send MESSAGE with nobody to answer live: an ask pauses the run durably
  held MESSAGE     send MESSAGE holding the stream: an ask waits for a decision made elsewhere
                   (the line `asked <id>` says which item, once it is in the log)
  prompt MESSAGE   send MESSAGE with a live approver that approves every ask at once
  resolve          approve every open item (the last one resumes the run here)
Prints `done <stop reason>` when the run it drove ended. The agent `payer` answers
"refund k" with a call of `refund` (asked about) beside one of `fetch` (allowed), and
"delegate k" with a call of its subagent `billing`, whose `refund` is asked about; anything
else gets "ok". Tools append `<tool> <call id>` to $LEDGER for every real execution, so that a
call run twice is seen.
"""

from __future__ import annotations

import asyncio
import os
import sys

from loopwright import Agent, Approval, Rules, ToolContext, tool
from loopwright.messages import ToolCall, ToolResultMessage, UserMessage
from loopwright.models import ModelRequest
from loopwright.runtime import Runtime
from loopwright.store import open_log
from loopwright.subagents import subagent_tool
from loopwright.testing import FunctionModel, Reply

TENANT, SESSION = "acme", "s1"
ASKED = Rules.from_yaml(
    "rules: [{name: refunds-asked, tool: refund, decision: ask}]\ndefault_decision: allow"
)


def _ledger(kind: str, call_id: str) -> None:
    with open(os.environ["LEDGER"], "a") as f:
        f.write(f"{kind} {call_id}\n")
        f.flush()
        os.fsync(f.fileno())


@tool
def refund(n: int, ctx: ToolContext) -> str:
    """Refund (a side effect that must never run twice)."""
    _ledger("refund", ctx.call_id)
    return f"refunded {n}"


@tool
def fetch(n: int, ctx: ToolContext) -> str:
    """Fetch a record."""
    _ledger("fetch", ctx.call_id)
    return f"fetched {n}"


def _asked(request: ModelRequest) -> tuple[str, str] | None:
    """The first word and the number of the user's message, if it is the last message."""
    last = request.messages[-1]
    if isinstance(last, UserMessage) and " " in last.content:
        word, number = last.content.split(" ", 1)
        return word, number
    return None


def _payer(request: ModelRequest) -> Reply:
    asked = _asked(request)
    if asked is not None and asked[0] == "refund":
        k = asked[1]
        calls = (
            ToolCall(id=f"refund-{k}", name="refund", args={"n": int(k)}),
            ToolCall(id=f"fetch-{k}", name="fetch", args={"n": int(k)}),
        )
        return Reply(text="checking", tool_calls=calls)
    if asked is not None and asked[0] == "delegate":
        k = asked[1]
        call = ToolCall(id=f"bill-{k}", name="billing", args={"request": f"refund {k}"})
        return Reply(tool_calls=(call,))
    return Reply(text="done" if isinstance(request.messages[-1], ToolResultMessage) else "ok")


def _billing(request: ModelRequest) -> Reply:
    asked = _asked(request)
    if asked is not None and asked[0] == "refund":
        k = asked[1]
        return Reply(tool_calls=(ToolCall(id=f"sub-{k}", name="refund", args={"n": int(k)}),))
    return Reply(text="refunded" if isinstance(request.messages[-1], ToolResultMessage) else "ok")


def agents() -> dict[str, Agent]:
    billing = Agent(
        name="billing",
        description="Refunds orders.",
        model=FunctionModel(_billing),
        tools=[refund],
        rules=ASKED,
    )
    payer = Agent(
        name="payer",
        model=FunctionModel(_payer),
        tools=[refund, fetch, subagent_tool(billing)],
        rules=ASKED,
    )
    return {"payer": payer}


def approve_all(request: object) -> Approval:
    return Approval.approve(by="prompt")


async def main(db: str, step: str, message: str = "") -> None:
    log = await open_log(db)
    runtime = Runtime(agents(), log)
    try:
        if step == "resolve":
            for item in await runtime.pending(TENANT):
                resolved = await runtime.resolve(TENANT, item.id, Approval.approve(by="worker"))
                if resolved.run is not None:
                    done = await resolved.run.wait()
                    print(f"done {done.stop_reason if done else None}", flush=True)
            return
        approver = approve_all if step == "prompt" else None
        live = await runtime.send(
            TENANT, "payer", SESSION, message, approver=approver, hold=step == "held"
        )
        if step == "held":
            async for seq, event in live.stream():
                if event.type == "pending:requested" and seq is not None:
                    print(f"asked {event.id}", flush=True)
                elif event.type == "subagent:event" and event.event.type == "pending:requested":
                    print(f"asked {event.event.id}", flush=True)  # the child logged it first
        done = await live.wait()
        print(f"done {done.stop_reason if done else None}", flush=True)
    finally:
        await runtime.close()
        await log.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
