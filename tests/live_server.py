"""A served test project: the shop (refunds a human approves, questions, held replies), a
greeter with a subagent, and a desk whose subagent asks for approval; `LiveServer` runs it in
uvicorn on a loopback port in a thread of the test process (test_server.py re-exports these
for the test_server_*.py files)."""

from __future__ import annotations

import contextlib
import socket
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from loopwright.project import load_project
from loopwright.server import create_app

SHOP_PY = '''\
import asyncio
from concurrent.futures import Future
from pathlib import Path

from loopwright import Agent, tool
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
    return f"refunded {amount:g} on {order}"


HELD: dict[str, Future] = {}
"""Messages whose reply waits until a test lets it go (test_server.py: `hold`)."""


async def reply(request):
    last = request.messages[-1]
    n = len(request.messages)
    if isinstance(last, ToolResultMessage):
        outputs = []
        for message in reversed(request.messages):
            if not isinstance(message, ToolResultMessage):
                break
            outputs.insert(0, message.content)
        return Reply(text="Done: " + "; ".join(outputs))
    text = last.content
    if text in HELD:
        await asyncio.wrap_future(HELD[text])
    if text.startswith("two refunds"):
        calls = (
            ToolCall(id=f"a{n}", name="refund", args={"order": "A-1", "amount": 5}),
            ToolCall(id=f"b{n}", name="refund", args={"order": "B-2", "amount": 7}),
        )
        return Reply(text="Two refunds.", tool_calls=calls)
    if text.startswith("refund"):
        call = ToolCall(id=f"r{n}", name="refund", args={"order": "A-1", "amount": 5})
        return Reply(text="Refunding now.", tool_calls=(call,))
    if text.startswith("ask"):
        call = ToolCall(id=f"q{n}", name="ask_user", args={"question": "Which colour?",
                                                           "options": ["red", "blue"]})
        return Reply(tool_calls=(call,))
    if text.startswith("slow"):  # (overlapping runs for the load test)
        return Reply(text="z" * 40, chunk=1, delay=0.02)
    said = [m.content for m in request.messages if isinstance(m, UserMessage)]
    return Reply(text="heard: " + " | ".join(said))


agent = Agent(
    name="shop",
    description="Refunds orders (a human approves each refund).",
    instructions="You refund orders.",
    model=FunctionModel(reply),
    tools=[refund, ask_user],
    rules=Path(__file__).with_name("rules.yaml"),
)
'''
SHOP_RULES = """\
default_decision: ask
rules:
  - {name: questions, tool: ask_user, decision: allow}
  - {name: refunds-need-approval, tool: refund, decision: ask}
"""
GREETER = {
    "agent.yaml": """\
        description: Says hello.
        instructions: Greet people.
        model: scripted:script.yaml
        """,
    "script.yaml": """\
        replies:
          - text: Hello there!
          - text: Hello again!
        """,
    "subagents/helper/agent.yaml": """\
        description: Helps the greeter.
        model: scripted:script.yaml
        """,
    "subagents/helper/script.yaml": "replies: [helped]\n",
}


DESK = {  # a parent whose subagent asks for approval: the parent pauses on the child's item
    "agent.yaml": """\
        description: The front desk.
        model: scripted:script.yaml
        """,
    "script.yaml": """\
        replies:
          - tool_calls: [{name: billing, args: {request: refund 5}, id: b1}]
          - text: Billing says it is done.
        """,
    "subagents/billing/agent.yaml": """\
        description: Handles refunds.
        model: scripted:script.yaml
        """,
    "subagents/billing/script.yaml": """\
        replies:
          - tool_calls: [{name: refund, args: {amount: 5}, id: r1}]
          - text: Refund of 5 done.
        """,
    "subagents/billing/tools.py": """\
        from loopwright import tool


        @tool
        def refund(amount: float) -> str:
            \"\"\"Refund an amount.\"\"\"
            return f"refunded {amount:g}"
        """,
    "subagents/billing/rules.yaml": "rules: [{name: refunds, tool: refund, decision: ask}]\n",
}


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def make_project(root: Path, toml: str = "") -> Path:
    (root / "agents" / "shop").mkdir(parents=True)
    (root / "loopwright.toml").write_text(toml)
    (root / "agents" / "shop" / "agent.py").write_text(SHOP_PY)
    (root / "agents" / "shop" / "rules.yaml").write_text(SHOP_RULES)
    write(root / "agents" / "greeter", GREETER)
    write(root / "agents" / "desk", DESK)
    return root


class LiveServer:
    """uvicorn serving `app` in a thread on a free loopback port; stops on exit."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.root = Path()
        config = uvicorn.Config(app, log_level="error", lifespan="on", timeout_graceful_shutdown=2)
        self.server = _Uvicorn(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        self.server.up.wait(60)  # a safety net: set once startup has ended, well or not
        assert self.server.started, "the server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kwargs)  # (a safety net)

    @contextlib.contextmanager
    def hold(self, message: str) -> Iterator[Callable[[], None]]:
        """The shop agent's reply to `message` waits until the test calls what this yields
        (or the block ends): its run is going on, whatever the test does meanwhile."""
        held = self.app.state.loopwright.project.agents["shop"].model.fn.__globals__["HELD"]
        gate = held[message] = Future()

        def release() -> None:
            with contextlib.suppress(InvalidStateError):  # (its run was cancelled)
                gate.set_result(None)

        try:
            yield release
        finally:
            release()
            del held[message]


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that says when its startup has ended."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.up = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.up.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        state = getattr(self.config.app.state, "loopwright", None)
        if state is not None:  # (as `loopwright serve` does: open streams end cleanly)
            state.draining.set()
        await super().shutdown(sockets)


@contextlib.contextmanager
def serving(root: Path, toml: str = "", **overrides: Any) -> Iterator[LiveServer]:
    """A test project at `root`, served until the block ends."""
    make_project(root, toml)
    with LiveServer(create_app(load_project(root), **overrides)) as live:
        live.root = root
        yield live


def served(name: str) -> Any:
    """A module's own server, as a fixture (conftest's `http` is a client of it)."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
        with serving(tmp_path_factory.mktemp(name) / "shop") as live:
            yield live

    return server
