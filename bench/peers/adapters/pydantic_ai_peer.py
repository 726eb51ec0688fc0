"""pydantic-ai peer: `Agent` over `FunctionModel`, the library's documented scripted model
(`TestModel` cannot script 500 steps).

Each fake response carries a fixed `usage`, so FunctionModel does not estimate tokens over the
whole history on every call (a test-only cost a real provider does not have). Changed from the
defaults: `UsageLimits(request_limit=None)` (the default stops a run at 50 requests). The sync
`ping` runs where pydantic-ai puts sync tools (a thread).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic_ai
from pydantic_ai import Agent, PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from scenarios import FINAL, PROMPT, TOKENS, next_ping, ping, wait

VERSION = pydantic_ai.__version__
USAGE = RequestUsage(input_tokens=10, output_tokens=1)
LIMITS = UsageLimits(request_limit=None)


def _tool_output(messages: list[Any]) -> str | None:
    last = messages[-1]
    if isinstance(last, ModelRequest):
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return returns[-1].content
    return None


def _answer() -> ModelResponse:
    return ModelResponse(parts=[TextPart(FINAL)], usage=USAGE)


def _ping_agent(steps: int) -> Agent:
    async def model(messages: list[Any], info: Any) -> ModelResponse:
        k = next_ping(_tool_output(messages), steps)
        if k is None:
            return _answer()
        return ModelResponse(
            parts=[ToolCallPart("ping", {"i": k}, tool_call_id=f"p{k}")], usage=USAGE
        )

    return Agent(FunctionModel(model), tools=[ping], name="bench")


async def _run(agent: Agent) -> str:
    return (await agent.run(PROMPT, usage_limits=LIMITS)).output


def long_loop(steps: int):
    agent = _ping_agent(steps)
    return lambda: _run(agent)


def wide_batch(n: int):
    async def model(messages: list[Any], info: Any) -> ModelResponse:
        if _tool_output(messages) is not None:
            return _answer()
        calls = [ToolCallPart("wait", {"i": i}, tool_call_id=f"w{i}") for i in range(n)]
        return ModelResponse(parts=calls, usage=USAGE)

    agent = Agent(FunctionModel(model), tools=[wait], name="bench")
    return lambda: _run(agent)


def many_sessions(n: int):
    agent = _ping_agent(1)
    return lambda: asyncio.gather(*(_run(agent) for _ in range(n)))


def streaming(n: int):
    async def stream(messages: list[Any], info: Any):
        for token in TOKENS[:n]:
            yield token

    agent = Agent(FunctionModel(stream_function=stream), name="bench")

    async def run() -> list[str]:
        deltas = []
        async with agent.run_stream_events(PROMPT, usage_limits=LIMITS) as events:
            async for e in events:
                if isinstance(e, PartStartEvent) and isinstance(e.part, TextPart):
                    deltas.append(e.part.content)  # the first token opens the part
                elif isinstance(e, PartDeltaEvent) and isinstance(e.delta, TextPartDelta):
                    deltas.append(e.delta.content_delta)
        return deltas

    return run
