"""langgraph peer: the prebuilt ReAct graph (`create_react_agent`) over a tiny fake chat model.

langchain_core's fakes (GenericFakeChatModel and friends) replay one shared list of replies and
cannot bind tools, so the model here is the smallest `BaseChatModel` that can: its reply is a
function of the last message alone (`scenarios.next_ping`), so one graph serves C's 200 runs,
and its methods are async, so no thread pool runs the model. Changed from the defaults:
`recursion_limit` (25 graph steps stop A after about a dozen tool calls). The sync `ping` runs
where langgraph's ToolNode puts sync tools (a thread pool).
"""

from __future__ import annotations

import asyncio
import warnings
from importlib.metadata import version
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from scenarios import FINAL, PROMPT, TOKENS, next_ping, ping, wait

with warnings.catch_warnings():  # deprecated in favour of langchain.agents, a separate package
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

VERSION = version("langgraph")
CONFIG = {"recursion_limit": 100_000}
INPUT = {"messages": [("user", PROMPT)]}


class Scripted(BaseChatModel):
    """`mode` "ping" (A, C: `steps` pings), "wide" (B: `steps` waits at once) or "stream" (D:
    `steps` tokens streamed)."""

    mode: str = "ping"
    steps: int = 0

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
        return self

    def _answer(self, messages: list[Any]) -> AIMessage:
        last = messages[-1]
        output = last.content if isinstance(last, ToolMessage) else None
        if self.mode == "wide":
            n = 0 if output is not None else self.steps
        else:
            k = next_ping(output, self.steps)
            n = 0 if k is None else 1
        if n == 0:
            return AIMessage(content=FINAL)
        calls = [("wait", i) for i in range(n)] if self.mode == "wide" else [("ping", k)]
        return AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": {"i": i}, "id": f"{name}{i}", "type": "tool_call"}
                for name, i in calls
            ],
        )

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
        return self._generate(messages)

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
        for token in TOKENS[: self.steps]:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


def _final(state: dict[str, Any]) -> str:
    return state["messages"][-1].content


def _graph(mode: str, steps: int, tools: list[Any]) -> Any:
    return create_react_agent(Scripted(mode=mode, steps=steps), tools)


def long_loop(steps: int):
    graph = _graph("ping", steps, [ping])

    async def run() -> str:
        return _final(await graph.ainvoke(INPUT, CONFIG))

    return run


def wide_batch(n: int):
    graph = _graph("wide", n, [wait])

    async def run() -> str:
        return _final(await graph.ainvoke(INPUT, CONFIG))

    return run


def many_sessions(n: int):
    graph = _graph("ping", 1, [ping])

    async def one() -> str:
        return _final(await graph.ainvoke(INPUT, CONFIG))

    return lambda: asyncio.gather(*(one() for _ in range(n)))


def streaming(n: int):
    graph = _graph("stream", n, [])

    async def run() -> list[str]:
        deltas = []
        async for chunk, _meta in graph.astream(INPUT, CONFIG, stream_mode="messages"):
            if isinstance(chunk, AIMessageChunk) and chunk.content:
                deltas.append(chunk.content)
        return deltas

    return run
