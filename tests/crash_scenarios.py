"""The crash model checker's scenarios: what a client does to a session, step by step, through
the runtime service (as every door does), and how each pending item is decided.

The agent `payer` answers a user message by its first word: `refund k` calls `refund` (asked
about), `pair k` calls `fetch` twice in one batch (allowed), `ask k` calls `ask_user`,
`delegate k` calls the subagent `billing` (whose `refund` is asked about), `handoff k` hands the
conversation to the agent `clerk` (`transfer_to_clerk`), `big k` calls `dump`,
whose result is over the agent's limit (stored whole: docs/large-results.md), `pay k` calls the
idempotent `pay` twice with the same arguments and the same call ids in every reply (each
attempt is a ledger entry; the bank books each idempotency key once), `slow k` waits
until the scenario lets the model answer (so that a steer, a follow-up or a cancel reaches a
run in flight), `fix k` calls `fetch` with an argument its `transform_reply` hook changes (the
changed reply is logged after its `reply:transformed` and acted on; its `after_batch` hook adds
context); anything else gets "ok", and a tool result gets "done". Every tool is a
coroutine recording each real execution in the case's ledger (`Process.tool`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from crash_model import Ledger, Process, here
from loopwright import Agent, Answer, Approval, Hooks, Rules, ToolContext, tool
from loopwright.hooks import RunInfo
from loopwright.messages import (
    AssistantMessage,
    CustomMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from loopwright.models import ModelRequest
from loopwright.notify.config import NotifySettings
from loopwright.notify.webhook import Sent
from loopwright.runtime import LiveRun, Runtime
from loopwright.runtime.custom import add_custom
from loopwright.state.compaction import SUMMARY_SYSTEM, Compaction
from loopwright.store.log import SessionKey
from loopwright.subagents import subagent_tool
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ask_user

ASKED = Rules.from_yaml(
    "rules: [{name: refunds-asked, tool: refund, decision: ask}]\ndefault_decision: allow"
)
SESSION = "s1"


@tool
async def refund(n: int, ctx: ToolContext) -> str:
    """Refund (a side effect that must never run twice)."""
    await here().tool(ctx.call_id)
    return f"refunded {n}"


@tool
async def fetch(n: int, ctx: ToolContext) -> str:
    """Fetch a record."""
    await here().tool(ctx.call_id)
    return f"fetched {n}"


@tool(idempotent=True)
async def pay(amount: int, ctx: ToolContext) -> str:
    """Pay through a bank that books each idempotency key once (re-run after a crash)."""
    process = here()
    await process.alive()
    ledger, key = process.ledger, ctx.idempotency_key
    ledger.entries.append((process.name, f"attempt {ctx.call_id} {key}"))
    charge = ledger.booked.setdefault(key, f"ch_{len(ledger.booked) + 1}")
    return f"paid {amount}: {charge}"


BIG = "".join(f"row {i:05d}\n" for i in range(6_000))  # (66,000 characters: over the limit)


@tool
async def dump(n: int, ctx: ToolContext) -> str:
    """A result over the agent's `max_tool_output`: stored whole by reference."""
    await here().tool(ctx.call_id)
    return BIG


def _words(request: ModelRequest) -> tuple[str, str] | None:
    last = request.messages[-1]
    if isinstance(last, UserMessage) and " " in last.content:
        word, number = last.content.split(" ", 1)
        return word, number
    return None


def agents(gate: asyncio.Event) -> dict[str, Agent]:
    """The scenarios' agents; `gate` holds the model's answer to `slow k` until it is set."""

    async def payer(request: ModelRequest) -> Reply:
        if request.system == SUMMARY_SYSTEM:
            return Reply(text="The user said hello twice.")
        asked = _words(request)
        word, k = asked if asked is not None else ("", "")
        if word == "refund":
            return Reply(tool_calls=(ToolCall(id=f"refund-{k}", name="refund", args={"n": 1}),))
        if word == "pair":
            calls = tuple(ToolCall(id=f"fetch-{k}{x}", name="fetch", args={"n": 2}) for x in "ab")
            return Reply(text="fetching", tool_calls=calls)
        if word == "pay":
            calls = tuple(ToolCall(id=f"pay-{x}", name="pay", args={"amount": 5}) for x in "ab")
            return Reply(tool_calls=calls)
        if word == "big":
            return Reply(tool_calls=(ToolCall(id=f"dump-{k}", name="dump", args={"n": 1}),))
        if word == "ask":
            args = {"question": "Which card?", "options": ["visa", "amex"]}
            return Reply(tool_calls=(ToolCall(id=f"ask-{k}", name="ask_user", args=args),))
        if word == "delegate":
            args = {"request": f"refund {k}"}
            return Reply(tool_calls=(ToolCall(id=f"bill-{k}", name="billing", args=args),))
        if word == "fix":  # its argument is changed by the transform_reply hook (`fixed`)
            return Reply(tool_calls=(ToolCall(id=f"fix-{k}", name="fetch", args={"n": 2}),))
        if word == "handoff":  # the conversation goes to `clerk` (by name: the runtime's)
            call = ToolCall(id=f"hand-{k}", name="transfer_to_clerk", args={})
            return Reply(tool_calls=(call,))
        if word == "cut":  # a final answer cut by the output limit: the run ends max_tokens
            return Reply(text="It was the best of", stop_reason="max_tokens")
        if word == "slow":
            await gate.wait()
            return Reply(text="slowly")
        last = request.messages[-1]
        return Reply(text="done" if isinstance(last, ToolResultMessage) else "ok")

    def billing(request: ModelRequest) -> Reply:
        asked = _words(request)
        if asked is not None and asked[0] == "refund":
            call = ToolCall(id=f"sub-{asked[1]}", name="refund", args={"n": 3})
            return Reply(tool_calls=(call,))
        last = request.messages[-1]
        return Reply(text="refunded" if isinstance(last, ToolResultMessage) else "ok")

    child = Agent(
        name="billing",
        description="Refunds orders.",
        model=FunctionModel(billing),
        tools=[refund],
        rules=ASKED,
    )
    main = Agent(
        name="payer",
        model=FunctionModel(payer),
        tools=[refund, fetch, pay, dump, ask_user, subagent_tool(child)],
        rules=ASKED,
        compaction=Compaction(keep_last=1, keep_tools=("fetch",)),  # (pinned-compaction)
        hooks=Hooks(transform_reply=fixed, after_batch=noted),
        handoffs=["clerk"],
    )
    clerk = Agent(name="clerk", model=FunctionModel(lambda request: Reply(text=CLERK)))
    return {"payer": main, "clerk": clerk}


CLERK = "clerk here"
"""What `clerk`, the agent `handoff k` hands the conversation to, answers to anything."""


def fixed(info: RunInfo, reply: AssistantMessage) -> AssistantMessage | None:
    """`fix k`'s call gets the argument 7 (other replies are kept)."""
    if not any(c.id.startswith("fix-") for c in reply.tool_calls):
        return None
    parts = [replace(p, args={"n": 7}) if isinstance(p, ToolCall) else p for p in reply.parts]
    return replace(reply, parts=tuple(parts))


def noted(info: RunInfo, results: list[ToolResultMessage]) -> str | None:
    return "fixed" if any(r.call_id.startswith("fix-") for r in results) else None


@dataclass
class Ack:
    """A client call that returned: what P1 holds the log to."""

    kind: str  # input | decision | steer | follow_up | cancel | custom
    value: Any
    item: str | None = None


@dataclass
class Ctx:
    """A case as its client sees it."""

    runtime: Runtime
    tenant: str
    ledger: Ledger
    gate: asyncio.Event
    acks: list[Ack] = field(default_factory=list)
    live: LiveRun | None = None
    prompt: asyncio.Future[Approval] | None = None
    deliverer: Any = None

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.tenant, "payer", SESSION)

    def ack(self, step: str, kind: str, value: Any, item: str | None = None) -> None:
        self.acks.append(Ack(kind, value, item))
        self.ledger.acks.append(step)


@dataclass(frozen=True)
class Step:
    name: str
    act: Callable[[Ctx], Awaitable[None]]
    call: str | None = None
    """The call whose item this step decides, as `decision`."""
    decision: Approval | Answer | None = None


def send(text: str, *, prompt: bool = False) -> Step:
    async def act(ctx: Ctx) -> None:
        approver = None
        if prompt:  # the CLI's [a]pprove/[d]eny: a person at the terminal answers live
            ctx.prompt = asyncio.get_running_loop().create_future()
            future = ctx.prompt

            async def approver(request: Any) -> Approval:
                return await future

        ctx.live = await ctx.runtime.send(ctx.tenant, "payer", SESSION, text, approver=approver)
        ctx.ack("send", "input", text)

    return Step("send", act)


def ended() -> Step:
    async def act(ctx: Ctx) -> None:
        assert ctx.live is not None
        await ctx.live.wait()

    return Step("run", act)


def decide(call_id: str, decision: Approval | Answer) -> Step:
    async def act(ctx: Ctx) -> None:
        [item] = [i for i in await ctx.runtime.pending(ctx.tenant) if i.call_id == call_id]
        resolved = await ctx.runtime.resolve(ctx.tenant, item.id, decision)
        assert resolved.status in ("waiting", "resumed"), resolved
        ctx.ack("resolve", "decision", decision, item.id)
        ctx.live = resolved.run or ctx.live
        if resolved.run is not None:
            await resolved.run.wait()

    return Step("resolve", act, call_id, decision)


def answer_prompt(decision: Approval) -> Step:
    async def act(ctx: Ctx) -> None:
        assert ctx.prompt is not None and ctx.live is not None
        ctx.prompt.set_result(decision)
        await ctx.live.wait()

    return Step("prompt", act)


def queue(mode: str, text: str) -> Step:
    async def act(ctx: Ctx) -> None:
        await (ctx.runtime.steer if mode == "steer" else ctx.runtime.follow_up)(ctx.key, text)
        ctx.ack(mode, mode, text)

    return Step(mode, act)


def cancel() -> Step:
    async def act(ctx: Ctx) -> None:
        ended = await ctx.runtime.cancel_run(ctx.key)
        ctx.ack("cancel", "cancel", ended)

    return Step("cancel", act)


def release() -> Step:
    async def act(ctx: Ctx) -> None:
        ctx.gate.set()
        assert ctx.live is not None
        await ctx.live.wait()

    return Step("release", act)


def compact() -> Step:
    async def act(ctx: Ctx) -> None:
        ctx.live = await ctx.runtime.compact(ctx.tenant, "payer", SESSION)
        await ctx.live.wait()

    return Step("compact", act)


def note(text: str) -> Step:
    """An app's custom message added between runs (`runtime.custom.add_custom`)."""

    async def act(ctx: Ctx) -> None:
        await add_custom(ctx.runtime, ctx.key, CustomMessage(kind="note", content=text))
        ctx.ack("custom", "custom", text)

    return Step("custom", act)


def tick() -> Step:
    async def act(ctx: Ctx) -> None:
        await ctx.deliverer.tick()

    return Step("tick", act)


class Hook:
    """A webhook: each notice it is sent is a ledger entry of the process sending it."""

    name = "hook"
    events = frozenset({"approval", "question", "resolved"})

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def send(self, message: Any) -> Sent:
        process: Process = here()
        await process.alive()
        self.ledger.entries.append((process.name, f"webhook {message['event']} {message['id']}"))
        return Sent(True, 200)


NOTIFY = NotifySettings(hold=60.0)
APPROVE = Approval.approve(by="client")
DENY = Approval.deny("no", by="client")


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: list[Step]
    decisions: dict[str, Approval | Answer]
    """How the client decides each call's item (the recovery decides so too)."""
    outbox: bool = False


SCENARIOS = [
    Scenario("tool-call", [send("pair 1"), ended()], {}),  # (the same batch, run as one)
    Scenario("parallel-batch", [send("pair 2"), ended(), send("pair 3"), ended()], {}),
    Scenario("approval", [send("refund 1"), ended(), decide("refund-1", APPROVE)], {}),
    Scenario("denial", [send("refund 1"), ended(), decide("refund-1", DENY)], {}),
    Scenario(
        "edit", [send("refund 1"), ended(), decide("refund-1", Approval.approve({"n": 9}))], {}
    ),
    Scenario("question", [send("ask 1"), ended(), decide("ask-1", Answer(text="amex"))], {}),
    Scenario("subagent-approval", [send("delegate 1"), ended(), decide("sub-1", APPROVE)], {}),
    Scenario("cancel", [send("slow 1"), cancel()], {}),
    Scenario("steer", [send("slow 1"), queue("steer", "mind the budget"), release()], {}),
    Scenario("follow-up", [send("slow 1"), queue("follow_up", "say bye"), release()], {}),
    Scenario("compaction", [send("hi 1"), ended(), send("hi 2"), ended(), compact()], {}),
    Scenario("pinned-compaction", [send("pair 1"), ended(), send("hi 2"), ended(), compact()], {}),
    Scenario(
        "webhook-outbox",
        [send("refund 1"), ended(), tick(), decide("refund-1", APPROVE), tick()],
        {},
        outbox=True,
    ),
    Scenario("cli-prompt", [send("refund 1", prompt=True), answer_prompt(APPROVE)], {}),
    Scenario("large-result", [send("big 1"), ended(), send("hi 2"), ended()], {}),
    Scenario("cut-answer", [send("cut 1"), ended(), send("hi 2"), ended()], {}),
    Scenario("transformed-reply", [send("fix 1"), ended(), send("hi 2"), ended()], {}),
    Scenario("custom-message", [send("hi 1"), ended(), note("seen"), send("hi 2"), ended()], {}),
    Scenario("handoff", [send("handoff 1"), ended(), send("hi 2"), ended()], {}),
]
"""Every scenario; a scenario's `decisions` default to its own steps' (`decisions_of`)."""


def decisions_of(scenario: Scenario) -> dict[str, Approval | Answer]:
    """How each item of the scenario is decided: as its steps do (else approved)."""
    out = dict(scenario.decisions)
    for step in scenario.steps:
        if step.call is not None and step.decision is not None:
            out.setdefault(step.call, step.decision)
    return out
