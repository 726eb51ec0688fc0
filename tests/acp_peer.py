"""A JSON-RPC peer of `loopwright acp` for the tests: the command in a real subprocess, spoken to
over its stdin and stdout one JSON message a line, as an editor would (no SDK in between)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from loopwright.cli.common import Place
from test_cli import LOOPWRIGHT

ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
STUCK = 60.0
"""Seconds before a test that waits for a message gives up (a stuck-guard, never a pace)."""

# An agent whose model is a function of the conversation, so that a session loaded in a new
# process answers from what the store holds.
AGENT_PY = '''\
import asyncio
import subprocess
from pathlib import Path

from loopwright import Agent, tool
from loopwright.subagents import subagents
from loopwright.messages import ToolCall, ToolResultMessage, UserMessage
from loopwright.testing import FunctionModel, Reply
from loopwright.tools import ask_user


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: The order's id.
        amount: How much to refund.
    """
    return f"refunded {amount} on {order}"


@tool
async def wait_forever() -> str:
    """Wait until cancelled."""
    await asyncio.Event().wait()
    return "never"


@tool
def shout() -> str:
    """Write to stdout, as careless code does."""
    print("printed by a tool")
    subprocess.run(["echo", "echoed by a subprocess"], check=True)
    return "shouted"


@tool
def noop() -> str:
    """Do nothing."""
    return "nothing"


def clerk_reply(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return Reply(text=f"clerk: {last.content}")
    call = ToolCall(id="c1", name="refund", args={"order": "B-2", "amount": 7})
    return Reply(tool_calls=(call,))


clerk = Agent(
    name="clerk",
    description="Issues refunds.",
    model=FunctionModel(clerk_reply),
    tools=[refund],
    rules=Path(__file__).with_name("rules.yaml"),
)


def reply(request):
    last = request.messages[-1]
    n = len(request.messages)
    if isinstance(last, ToolResultMessage):
        if last.tool == "noop":
            return Reply(tool_calls=(ToolCall(id=f"n{n}", name="noop", args={}),))
        return Reply(text=f"Done: {last.content}")
    if last.content.startswith("refund"):
        call = ToolCall(id=f"r{n}", name="refund", args={"order": "A-1", "amount": 5})
        return Reply(thinking="Needs approval.", text="Refunding.", tool_calls=(call,))
    if last.content.startswith("wait"):
        return Reply(tool_calls=(ToolCall(id=f"w{n}", name="wait_forever", args={}),))
    if last.content.startswith("ask twice"):
        calls = tuple(
            ToolCall(id=f"q{n}{x}", name="ask_user", args={"question": f"Which {x}?"})
            for x in ("colour", "size")
        )
        return Reply(tool_calls=calls)
    if last.content.startswith("ask"):
        call = ToolCall(id=f"q{n}", name="ask_user", args={"question": "Which colour?"})
        return Reply(tool_calls=(call,))
    if last.content.startswith("time"):
        args = {"timezone": "UTC"}
        call = ToolCall(id=f"t{n}", name="mcp__clock__get_current_time", args=args)
        return Reply(tool_calls=(call,))
    if last.content.startswith("delegate"):
        call = ToolCall(id=f"d{n}", name="clerk", args={"request": "refund B-2"})
        return Reply(tool_calls=(call,))
    if last.content.startswith("shout"):
        return Reply(tool_calls=(ToolCall(id=f"s{n}", name="shout", args={}),))
    if last.content.startswith("two"):
        calls = tuple(
            ToolCall(id=f"r{n}{x}", name="refund", args={"order": x, "amount": 1}) for x in "AB"
        )
        return Reply(tool_calls=calls)
    if last.content.startswith("fail"):
        return Reply.parse({"fail": "the provider is down"})
    if last.content.startswith("long"):
        return Reply(text="Cut sho", stop_reason="max_tokens")
    if last.content.startswith("loop"):
        return Reply(tool_calls=(ToolCall(id=f"n{n}", name="noop", args={}),))
    said = [m.content for m in request.messages if isinstance(m, UserMessage)]
    return Reply(text="heard: " + " | ".join(said))


agent = Agent(
    name="refunds",
    description="Refunds orders (a human approves each refund).",
    model=FunctionModel(reply),
    tools=[refund, wait_forever, ask_user, noop, shout, subagents(clerk)],
    rules=Path(__file__).with_name("rules.yaml"),
    max_turns=4,
)
'''
RULES = """\
default_decision: ask
rules:
  - {name: questions, tool: ask_user, decision: allow}
  - {name: waiting, tool: wait_forever, decision: allow}
  - {name: clock, tool: mcp__clock__get_current_time, decision: allow}
  - {name: idle, tool: noop, decision: allow}
  - {name: loud, tool: shout, decision: allow}
  - {name: delegate, tool: clerk, decision: allow}
  - {name: refunds-need-approval, tool: refund, decision: ask}
"""


def make_project(root: Path) -> Path:
    folder = root / "agents" / "refunds"
    folder.mkdir(parents=True)
    (folder / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    (folder / "rules.yaml").write_text(RULES)
    return root


Message = dict[str, Any]


class Peer:
    """`loopwright acp refunds` on `project`, and the messages it sent."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = 0

    @classmethod
    async def start(cls, project: Path) -> Peer:
        process = await asyncio.create_subprocess_exec(
            LOOPWRIGHT,
            "acp",
            "refunds",
            "--project",
            str(project),
            cwd=project,
            env=ENV,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def send(self, message: Message) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: Message) -> int:
        self.ids += 1
        await self.send({"id": self.ids, "method": method, "params": params})
        return self.ids

    async def notify(self, method: str, params: Message) -> None:
        await self.send({"method": method, "params": params})

    async def read(self) -> Message:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), STUCK)
        assert line, "the agent closed its stdout"
        message: Message = json.loads(line)
        assert message.pop("jsonrpc") == "2.0"
        return message

    async def until(
        self, request: int, on: Callable[[Message], Any] | None = None
    ) -> tuple[list[Message], Message]:
        """The messages up to the answer to `request`, and that answer; `on` sees each first
        (and may answer a request of the agent's)."""
        seen: list[Message] = []
        while True:
            message = await self.read()
            if "method" not in message and message.get("id") == request:
                return seen, message
            seen.append(message)
            if on is not None:
                reply = on(message)
                if asyncio.iscoroutine(reply):
                    await reply

    async def call(self, method: str, params: Message, on: Any = None) -> tuple[list[Message], Any]:
        seen, answer = await self.until(await self.request(method, params), on)
        assert "error" not in answer, answer
        return seen, answer["result"]

    async def answer(self, request: Message, result: Message) -> None:
        await self.send({"id": request["id"], "result": result})

    async def handshake(self, **capabilities: Any) -> Message:
        _, result = await self.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    **capabilities,
                },
                "clientInfo": {"name": "test-client", "version": "1.0"},
            },
        )
        return dict(result)

    async def close(self) -> str:
        """Close its stdin (the client went away): it ends; what it wrote on stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        err = await asyncio.wait_for(self.process.stderr.read(), STUCK)
        assert await asyncio.wait_for(self.process.wait(), STUCK) == 0, err
        return err.decode()

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


def brief(message: Message) -> tuple[Any, ...]:
    """A message in a line: an update's kind and text (or call and status), a request's method."""
    if message.get("method") == "session/update":
        update = message["params"]["update"]
        kind = update["sessionUpdate"]
        if "content" in update and isinstance(update["content"], dict):
            return (kind, update["content"]["text"])
        return (kind, update["toolCallId"], update.get("status"))
    if "method" in message:
        return (message["method"],)
    return ("answer", message.get("result"))


# ---- what the tests share -----------------------------------------------------------------

ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


def answering(peer: Peer, result: Message, asked: list[Message]) -> Any:
    async def on(message: Message) -> None:
        if message.get("method") == "session/request_permission":
            asked.append(message)
            await peer.answer(message, result)

    return on


def approvals(project: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [LOOPWRIGHT, "approvals", "--project", str(project), "--json", *args],
        env=ENV,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


async def stored_items(project: Path) -> list[dict[str, Any]]:
    """Every pending item the project's log holds, decided or not."""
    log = await Place(project).log()
    try:
        return [asdict(item) for item in (await log.pending("default", status=None)).items]
    finally:
        await log.close()


async def new_session(peer: Peer, **params: Any) -> str:
    _, result = await peer.call("session/new", {"cwd": "/", "mcpServers": [], **params})
    return str(result["sessionId"])


async def prompt(peer: Peer, session: str, text: str, on: Any = None) -> tuple[list[Message], Any]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    return await peer.call("session/prompt", params, on)


REFUND_STREAM = [
    ("agent_thought_chunk", "Needs approval."),
    ("agent_message_chunk", "Refunding."),
    ("tool_call", "r1", "pending"),
    ("session/request_permission",),
]
