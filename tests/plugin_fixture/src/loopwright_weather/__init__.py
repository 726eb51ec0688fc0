"""A loopwright plugin: the `forecast` tool, the `rain` toolset, hooks, the `weather` model
provider and a notifier. `SEEN` records what its hooks saw (the test prints it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from loopwright import Hooks, tool
from loopwright.hooks import RunInfo
from loopwright.messages import ToolCall
from loopwright.models.scripted import ScriptedModel
from loopwright.plugins import Registry
from loopwright.tools import Outcome
from loopwright.toolsets import ToolList

SEEN: list[str] = []


@tool
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"sunny in {city}"


@tool
def umbrella(city: str) -> str:
    """Whether to take an umbrella in a city."""
    return f"no umbrella needed in {city}"


def started(info: RunInfo) -> None:
    SEEN.append(f"weather on_run_start {info.agent}")


async def stamped(info: RunInfo, call: ToolCall, outcome: Outcome) -> Outcome:
    SEEN.append(f"weather after_tool {call.name}")
    return replace(outcome, content=f"{outcome.content} (checked by the weather plugin)")


def weather_model(city: str) -> ScriptedModel:
    """`weather:<city>`: asks for the forecast of the city, then tells it."""
    script: list[Any] = [
        {"tool_calls": [{"name": "forecast", "args": {"city": city}, "id": "w1"}], "chunk": 999},
        {"text": f"Tomorrow it will be sunny in {city}.", "chunk": 999},
    ]
    return ScriptedModel.from_script(script, name=f"weather:{city}")


class Pager:
    """A notifier (`loopwright.plugins.Notifier`) that keeps the notifications it was sent."""

    name = "pager"
    events = frozenset({"approval", "resolved"})

    def __init__(self) -> None:
        self.sent: list[Mapping[str, Any]] = []

    async def send(self, message: Mapping[str, Any]) -> Any:
        from loopwright.notify import Sent

        self.sent.append(message)
        return Sent(True, 200)


PAGER = Pager()


def register(reg: Registry) -> None:
    reg.tool(forecast)
    reg.toolset(ToolList([umbrella], name="rain"))
    reg.hooks(Hooks(on_run_start=started, after_tool=stamped))
    reg.provider("weather", weather_model)
    reg.notifier(PAGER)
