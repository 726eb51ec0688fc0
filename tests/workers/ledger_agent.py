"""A worker process for the crash and cross-process tests.

usage: python ledger_agent.py DB SESSION ACTION [ARG...]
  run MESSAGE            open the session and run MESSAGE (recovering a dead run first);
                         "cycle K" charges and fetches, "garble K" reads a label that is
                         not valid text
  resume                 resume a paused run
  resolve ID approve|deny [JSON_ARGS]   decide through a runtime: the last open item resumes
                                        the run here, and the line says how it stopped
  answer ID TEXT         answer a pending question (the same)
Tools write one line per real execution to $LEDGER, so "never ran twice" is counted. A
message starting "slow" holds the session: the model prints "holding" and waits for a line. With
$CRASH_IN_TOOL=name the tool kills the process after its side effect (a kill mid-call).
Prints the stop reason (and pending ids) as one JSON line. Sessions are the agent's, under the
tenant `default`; $LOOPWRIGHT_LEASE_SECONDS shortens the lease of a process that will be killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from loopwright import Agent, Answer, Approval, Rules, SessionBusy, ToolContext, tool
from loopwright.messages import ToolResultMessage, UserMessage
from loopwright.models import ModelRequest
from loopwright.runtime import Runtime, open_session
from loopwright.store import open_log
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ask_user


def _ledger(kind: str, call_id: str) -> None:
    with open(os.environ["LEDGER"], "a") as f:
        f.write(f"{kind} {call_id}\n")
        f.flush()
        os.fsync(f.fileno())
    if os.environ.get("CRASH_IN_TOOL") == kind:
        os._exit(87)


@tool
def charge(n: int, ctx: ToolContext) -> str:
    """Charge a card (a side effect that must never run twice)."""
    _ledger("charge", ctx.call_id)
    return f"charged {n}"


@tool(idempotent=True)
async def fetch(n: int, ctx: ToolContext) -> str:
    """Fetch a record (safe to run again)."""
    await asyncio.sleep(0)
    _ledger("fetch", ctx.call_id)
    return f"fetched {n}"


@tool
def label(n: int, ctx: ToolContext) -> str:
    """Read a label whose bytes are not UTF-8: a lone surrogate, as `os.listdir` gives one."""
    _ledger("label", ctx.call_id)
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    return f"{name} {n}"


@tool
def refund(n: int, ctx: ToolContext) -> str:
    """Refund (asks a human first)."""
    _ledger("refund", ctx.call_id)
    return f"refunded {n}"


def reply(request: ModelRequest) -> Reply:
    last = request.messages[-1]
    if isinstance(last, UserMessage) and last.content.startswith("cycle "):
        k = last.content.split()[1]
        calls = [("charge", f"charge-{k}"), ("fetch", f"fetch-{k}")]
    elif isinstance(last, UserMessage) and last.content.startswith("refund "):
        k = last.content.split()[1]
        calls = [("refund", f"refund-{k}-a"), ("fetch", f"fetch-r{k}"), ("refund", f"refund-{k}-b")]
    elif isinstance(last, UserMessage) and last.content.startswith("ask "):
        k = last.content.split()[1]
        from loopwright.messages import ToolCall

        question = ToolCall(
            id=f"ask-{k}",
            name="ask_user",
            args={"question": "Which card?", "options": ["visa", "amex"]},
        )
        return Reply(
            tool_calls=(question, ToolCall(id=f"fetch-a{k}", name="fetch", args={"n": int(k)}))
        )
    elif isinstance(last, UserMessage) and last.content.startswith("garble "):
        k = last.content.split()[1]
        calls = [("label", f"label-{k}")]
    elif isinstance(last, UserMessage) and last.content.startswith("slow"):
        return held()  # type: ignore[return-value]
    elif isinstance(last, ToolResultMessage) and last.content.startswith("caf"):
        # the label's text, made valid where the tool's result became its outcome; this model
        # (in process: no provider's edge) answers with the raw bytes again, which no log takes
        return Reply(text="read " + b"caf\xe9".decode("utf-8", "surrogateescape"))
    else:
        done = "done" if isinstance(last, ToolResultMessage) else "ok"
        return Reply(text=done)
    from loopwright.messages import ToolCall

    return Reply(
        text="working",
        tool_calls=tuple(
            ToolCall(id=call_id, name=name, args={"n": int(k)}) for name, call_id in calls
        ),
    )


async def held() -> Reply:
    """A reply that keeps the session claimed: says "holding", then waits for a line on stdin."""
    print("holding", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    return Reply(text="released")


AGENT = Agent(
    name="ledger",
    model=FunctionModel(reply),
    tools=[charge, fetch, label, refund, ask_user],
    rules=Rules.from_yaml(
        "rules: [{name: refunds-asked, tool: refund, decision: ask}]\ndefault_decision: allow"
    ),
)


async def main(db: str, session_id: str, action: str, *args: str) -> None:
    log = await open_log(db)
    try:
        await act(log, session_id, action, *args)
    finally:
        await log.close()


async def act(log, session_id: str, action: str, *args: str) -> None:
    if action in ("answer", "resolve"):
        if action == "answer":
            decision: Answer | Approval = Answer(text=args[1], by="worker")
        else:
            edited = json.loads(args[2]) if len(args) > 2 else None
            decision = Approval(approved=args[1] == "approve", args=edited, by="worker")
        runtime = Runtime({AGENT.name: AGENT}, log)
        resolved = await runtime.resolve("default", args[0], decision)
        line = {"status": resolved.status, "outstanding": len(resolved.outstanding)}
        if resolved.run is not None:
            done = await resolved.run.wait()
            line |= {"stop": done.stop_reason, "text": done.text} if done else {"stop": None}
        await runtime.close()
        print(json.dumps(line))
        return
    session = await open_session(AGENT, log, session_id)
    try:
        run = session.resume() if action == "resume" else session.run(args[0])
        result = await run.result()
    except SessionBusy as exc:
        print(json.dumps({"stop": "busy", "error": str(exc)}))
        return
    print(
        json.dumps({"stop": result.stop_reason, "text": result.text, "pending": result.pending_ids})
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
