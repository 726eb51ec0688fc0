"""smolagents peer: `ToolCallingAgent` over a minimal `smolagents.Model` subclass.

smolagents runs synchronously, so each run goes to a thread (`asyncio.to_thread`); an agent
keeps its memory between runs, so C builds its 200 agents (untimed). Its tools are sync and
run inline or, for several calls in one step, on its own thread pool: B uses
`scenarios.wait_blocking` (the same 50 ms, blocking). A run ends only when the model calls the
built-in `final_answer` tool. Changed from the defaults: `max_steps` (20 stops A) and
`verbosity_level=OFF` (rich's console output on every step).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from scenarios import FINAL, PROMPT, TOKENS, next_ping, ping, wait_blocking
from smolagents import LogLevel, Tool, ToolCallingAgent
from smolagents.models import (
    ChatMessage,
    ChatMessageStreamDelta,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    ChatMessageToolCallStreamDelta,
    MessageRole,
    Model,
)

VERSION = version("smolagents")
MAX_STEPS = 100_000


class Ping(Tool):
    name = "ping"
    description = "Trivial sync tool."
    inputs = {"i": {"type": "integer", "description": "the step"}}
    output_type = "string"

    def forward(self, i: int) -> str:
        return ping(i)


class Wait(Tool):
    name = "wait"
    description = "Blocks for WIDE_SLEEP seconds."
    inputs = {"i": {"type": "integer", "description": "the call"}}
    output_type = "string"

    def forward(self, i: int) -> str:
        return wait_blocking(i)


def _call(name: str, arguments: Any, id: str) -> ChatMessageToolCall:
    function = ChatMessageToolCallFunction(name=name, arguments=arguments)
    return ChatMessageToolCall(id=id, type="function", function=function)


FINAL_ANSWER = _call("final_answer", {"answer": FINAL}, "final")


def _tool_output(messages: list[Any]) -> str | None:
    last = messages[-1]
    if last.role != MessageRole.TOOL_RESPONSE:
        return None
    text = last.content[0]["text"] if isinstance(last.content, list) else last.content
    return text.rpartition("\n")[2]  # "Call id: ...\n<the tool's output>"


class Scripted(Model):
    def __init__(self, turn: Callable[[Any], list[Any]] | None = None, deltas: int = 0) -> None:
        super().__init__(model_id="scripted")
        self.turn, self.deltas = turn, deltas

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kw: Any) -> ChatMessage:  # fmt: skip
        assert self.turn is not None
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=self.turn(messages))

    def generate_stream(self, messages: Any, stop_sequences: Any = None,
                        response_format: Any = None, tools_to_call_from: Any = None,
                        **kw: Any):  # fmt: skip
        for token in TOKENS[: self.deltas]:
            yield ChatMessageStreamDelta(content=token)
        function = ChatMessageToolCallFunction(
            name="final_answer", arguments=json.dumps({"answer": FINAL})
        )
        call = ChatMessageToolCallStreamDelta(
            index=0, id="final", type="function", function=function
        )
        yield ChatMessageStreamDelta(tool_calls=[call])


def _agent(model: Scripted, tools: list[Tool], **kw: Any) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=tools, model=model, max_steps=MAX_STEPS, verbosity_level=LogLevel.OFF, **kw
    )


def _pings(steps: int) -> Callable[[Any], list[Any]]:
    def turn(messages: Any) -> list[Any]:
        k = next_ping(_tool_output(messages), steps)
        return [FINAL_ANSWER] if k is None else [_call("ping", {"i": k}, f"p{k}")]

    return turn


def long_loop(steps: int):
    agent = _agent(Scripted(_pings(steps)), [Ping()])
    return lambda: asyncio.to_thread(agent.run, PROMPT)


def wide_batch(n: int):
    def turn(messages: Any) -> list[Any]:
        if _tool_output(messages) is not None:
            return [FINAL_ANSWER]
        return [_call("wait", {"i": i}, f"w{i:02d}") for i in range(n)]

    agent = _agent(Scripted(turn), [Wait()])
    return lambda: asyncio.to_thread(agent.run, PROMPT)


def many_sessions(n: int):
    model = Scripted(_pings(1))
    agents = [_agent(model, [Ping()]) for _ in range(n)]
    return lambda: asyncio.gather(*(asyncio.to_thread(a.run, PROMPT) for a in agents))


def streaming(n: int):
    agent = _agent(Scripted(deltas=n), [], stream_outputs=True)

    def run() -> list[str]:
        return [
            e.content
            for e in agent.run(PROMPT, stream=True)
            if isinstance(e, ChatMessageStreamDelta) and e.content
        ]

    return lambda: asyncio.to_thread(run)
