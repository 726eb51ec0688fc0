"""The floor: an agent loop in plain asyncio and dicts, no framework at all.

It does the work every adapter must do, and nothing more: the fake model streams its reply as
events, the loop gathers them into a message, runs the requested calls concurrently (a sync
tool inline, an async one awaited) and goes on until a reply asks for none. The loop is an
async generator of events, its "streaming API"; `answer` drains it. What loopwright costs
beyond this is its own overhead.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from scenarios import FINAL, PROMPT, TOKENS, next_ping, ping, wait

VERSION = "n/a"

Event = dict[str, Any]
Model = Callable[[list[Event]], AsyncIterator[Event]]


async def events(model: Model, tools: dict[str, Callable[..., Any]], prompt: str):
    history: list[Event] = [{"role": "user", "content": prompt}]
    while True:
        text, calls = "", []
        async for event in model(history):
            if event["type"] == "text":
                text += event["delta"]
            else:
                calls.append(event)
            yield event
        history.append({"role": "assistant", "content": text, "calls": calls})
        if not calls:
            yield {"type": "answer", "text": text}
            return

        async def run(call: Event) -> Event:
            output = tools[call["name"]](**call["args"])
            if inspect.isawaitable(output):
                output = await output
            return {"role": "tool", "type": "result", "id": call["id"], "content": output}

        results = await asyncio.gather(*map(run, calls))
        history.extend(results)
        for result in results:
            yield result


async def answer(model: Model, tools: dict[str, Callable[..., Any]]) -> str:
    async for event in events(model, tools, PROMPT):
        if event["type"] == "answer":
            return str(event["text"])
    raise RuntimeError("the loop ended without an answer")


def pinging(steps: int) -> Model:
    async def model(history: list[Event]) -> AsyncIterator[Event]:
        last = history[-1]
        k = next_ping(last["content"] if last["role"] == "tool" else None, steps)
        if k is None:
            yield {"type": "text", "delta": FINAL}
        else:
            yield {"type": "call", "id": f"c{k}", "name": "ping", "args": {"i": k}}

    return model


# ---- scenarios: each builds (untimed) and returns the async thunk that is timed


def long_loop(steps: int):
    model = pinging(steps)
    return lambda: answer(model, {"ping": ping})


def wide_batch(n: int):
    async def model(history: list[Event]) -> AsyncIterator[Event]:
        if history[-1]["role"] == "tool":
            yield {"type": "text", "delta": FINAL}
            return
        for i in range(n):
            yield {"type": "call", "id": f"w{i}", "name": "wait", "args": {"i": i}}

    return lambda: answer(model, {"wait": wait})


def many_sessions(n: int):
    model = pinging(1)
    return lambda: asyncio.gather(*(answer(model, {"ping": ping}) for _ in range(n)))


def streaming(n: int):
    async def model(history: list[Event]) -> AsyncIterator[Event]:
        for token in TOKENS[:n]:
            yield {"type": "text", "delta": token}

    async def consume() -> list[str]:
        return [e["delta"] async for e in events(model, {}, PROMPT) if e["type"] == "text"]

    return consume
