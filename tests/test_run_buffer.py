"""The buffer between a run's task and its reader (`driver.Run`): a reader that stops reading
holds the loop at `HIGH_WATER` unread events; `result()`, which drains at once, never does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from conftest import verify
from loopwright import Agent, Session
from loopwright.events import MessageCompleted, TextDelta
from loopwright.loop.driver import HIGH_WATER
from loopwright.messages import AssistantMessage, Text, Usage
from loopwright.models import ModelRequest

DELTAS = 3 * HIGH_WATER


class Counting:
    """A model streaming `DELTAS` one-character deltas, counting what it has streamed."""

    name = "counting:model"
    context_window = 100_000

    def __init__(self) -> None:
        self.streamed = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
        for _ in range(DELTAS):
            self.streamed += 1
            yield TextDelta(delta="x")
        reply = AssistantMessage(parts=(Text(text="x" * DELTAS),), usage=Usage(input_tokens=1))
        yield MessageCompleted(message=reply)


async def test_result_drains_a_run_of_more_events_than_the_high_water_mark() -> None:
    model = Counting()
    result = await Session(Agent(model=model)).run("go").result()
    verify(result.events)
    deltas = [e for e in result.events if isinstance(e, TextDelta)]
    assert len(deltas) == DELTAS and result.text == "x" * DELTAS
    assert [e.type for e in result.events][-4:] == [
        "message:completed",
        "step:finished",
        "loop:done",
        "done",
    ]


async def test_a_reader_that_stops_reading_holds_the_loop_at_the_high_water_mark() -> None:
    model = Counting()
    async with Session(Agent(model=model)).run("go") as run:
        first = await anext(aiter(run))
        assert first.type == "session"
        held = model.streamed
        # the buffer filled up while the reader waited to be woken for `session`: it and
        # `input:received`, `step:started`, `budget:check`, then the deltas
        assert held == HIGH_WATER - 4
        for _ in range(100):  # the run's task gets its turns (no clock involved)
            await asyncio.sleep(0)
        assert model.streamed == held  # still waiting for room: nothing was read
        events = [first]
        async for event in run:  # reading makes room: the run goes on to its end
            events.append(event)
    verify(events)
    assert model.streamed == DELTAS
    assert sum(isinstance(e, TextDelta) for e in events) == DELTAS
