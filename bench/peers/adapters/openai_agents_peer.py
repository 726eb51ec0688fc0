"""openai-agents peer: `Agent` and `Runner` over a minimal `agents.Model` subclass.

Changed from the defaults: `max_turns` (10 stops A) and tracing off (by default it uploads
spans to OpenAI, which a fake-model run cannot reach). The sync `ping` runs where
`function_tool` puts sync tools (a thread). D builds the `ResponseTextDeltaEvent` per delta
that a real provider client would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)
from scenarios import FINAL, PROMPT, TOKENS, next_ping, ping, wait

VERSION = version("openai-agents")
MAX_TURNS = 100_000
set_tracing_disabled(True)


def _message(text: str) -> ResponseOutputMessage:
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id="m", type="message", role="assistant", status="completed", content=[part]
    )


def _call(name: str, i: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=f"{name}{i}", name=name, arguments=json.dumps({"i": i})
    )


def _tool_output(items: Any) -> str | None:
    if isinstance(items, list) and items and items[-1].get("type") == "function_call_output":
        return items[-1]["output"]
    return None


class Scripted(Model):
    def __init__(self, turn: Callable[[Any], list[Any]] | None = None, deltas: int = 0) -> None:
        self.turn, self.deltas = turn, deltas

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):
        assert self.turn is not None
        return ModelResponse(output=self.turn(input), usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):
        tokens = TOKENS[: self.deltas]
        for seq, token in enumerate(tokens):
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="m",
                output_index=0,
                content_index=0,
                delta=token,
                logprobs=[],
                sequence_number=seq,
            )
        response = Response(
            id="r",
            object="response",
            created_at=0,
            model="scripted",
            output=[_message("".join(tokens))],
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(tokens)
        )


def _ping_agent(steps: int) -> Agent:
    def turn(items: Any) -> list[Any]:
        k = next_ping(_tool_output(items), steps)
        return [_message(FINAL)] if k is None else [_call("ping", k)]

    return Agent(name="bench", model=Scripted(turn), tools=[function_tool(ping)])


async def _run(agent: Agent) -> str:
    return (await Runner.run(agent, PROMPT, max_turns=MAX_TURNS)).final_output


def long_loop(steps: int):
    agent = _ping_agent(steps)
    return lambda: _run(agent)


def wide_batch(n: int):
    def turn(items: Any) -> list[Any]:
        if _tool_output(items) is not None:
            return [_message(FINAL)]
        return [_call("wait", i) for i in range(n)]

    agent = Agent(name="bench", model=Scripted(turn), tools=[function_tool(wait)])
    return lambda: _run(agent)


def many_sessions(n: int):
    agent = _ping_agent(1)
    return lambda: asyncio.gather(*(_run(agent) for _ in range(n)))


def streaming(n: int):
    agent = Agent(name="bench", model=Scripted(deltas=n))

    async def run() -> list[str]:
        deltas = []
        result = Runner.run_streamed(agent, PROMPT, max_turns=MAX_TURNS)
        async for e in result.stream_events():
            if e.type == "raw_response_event" and isinstance(e.data, ResponseTextDeltaEvent):
                deltas.append(e.data.delta)
        return deltas

    return run
