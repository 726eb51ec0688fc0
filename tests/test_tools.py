"""`@tool`: schemas from signatures and docstrings, validation, flags, the context."""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

import pytest
from pydantic import BaseModel

from loopwright import ConfigError, ToolContext, tool
from loopwright.tools import to_content


class Address(BaseModel):
    city: str
    zip: str | None = None


@tool
def ship(
    order_id: str,
    speed: Literal["normal", "express"] = "normal",
    to: Address | None = None,
    ctx: ToolContext | None = None,
) -> str:
    """Ship an order.

    Longer explanation that the model also reads.

    Args:
        order_id: The order to ship,
            continued on a second line.
        speed: How fast.

    Returns:
        A confirmation.
    """
    return f"{order_id} {speed} {to.city if to else '-'}"


def test_schema_and_description_come_from_signature_and_docstring():
    assert ship.name == "ship"
    assert ship.description == "Ship an order. Longer explanation that the model also reads."
    params = ship.parameters
    assert params["required"] == ["order_id"]
    assert params["properties"]["order_id"] == {
        "type": "string",
        "description": "The order to ship, continued on a second line.",
    }
    assert params["properties"]["speed"] == {
        "enum": ["normal", "express"],
        "type": "string",
        "default": "normal",
        "description": "How fast.",
    }
    assert "ctx" not in params["properties"]
    assert params["additionalProperties"] is False
    assert "Address" in params["$defs"]


def test_validation_coerces_and_reports():
    assert ship.validate({"order_id": "A", "to": {"city": "Oslo"}})["to"] == Address(city="Oslo")
    with pytest.raises(ValueError) as info:
        ship.validate({"order_id": 3, "speed": "warp"})
    assert str(info.value) == (
        "order_id: Input should be a valid string; speed: Input should be 'normal' or 'express'"
    )


def test_flags_and_overrides():
    @tool(
        name="fetch-page",
        description="Fetch.",
        sequential=True,
        idempotent=True,
        timeout=3,
        max_output=10,
        inline=True,
    )
    def fetch(url: str) -> str:
        return url

    assert (
        fetch.name,
        fetch.description,
        fetch.sequential,
        fetch.idempotent,
        fetch.timeout,
        fetch.max_output,
        fetch.inline,
        fetch.is_async,
    ) == ("fetch-page", "Fetch.", True, True, 3, 10, True, False)


async def test_sync_tools_run_in_a_worker_thread_unless_inline():
    @tool
    def where() -> str:
        """Which thread."""
        return threading.current_thread().name

    @tool(inline=True)
    def here() -> str:
        """Which thread."""
        return threading.current_thread().name

    ctx = ToolContext(session_id="s", tenant="t", agent="a", call_id="c")
    assert (await where.call({}, ctx)).startswith("loopwright-tool")
    assert await here.call({}, ctx) == threading.current_thread().name


def test_blocking_is_deprecated_and_means_the_default():
    with pytest.warns(DeprecationWarning, match="inline=True"):
        threaded = tool(name="a", blocking=True)(lambda: "x")
    with pytest.warns(DeprecationWarning):
        inline = tool(name="b", blocking=False)(lambda: "x")
    assert (threaded.inline, inline.inline) == (False, True)


async def test_async_tools_get_a_deadline_in_their_context(monkeypatch: pytest.MonkeyPatch):
    from types import SimpleNamespace

    import loopwright.loop.calls
    import loopwright.tools
    from loopwright.loop.calls import execute
    from loopwright.messages import ToolCall
    from loopwright.tools import Scheduled

    clock = SimpleNamespace(monotonic=lambda: 100.0)  # the tools' clock, injected
    monkeypatch.setattr(loopwright.tools, "time", clock)
    monkeypatch.setattr(loopwright.loop.calls, "time", clock)

    @tool(timeout=5)
    async def timed(ctx: ToolContext) -> str:
        """Report the time left, before and after 1.5 s pass."""
        before = ctx.time_left()
        clock.monotonic = lambda: 101.5
        await asyncio.sleep(0)
        return f"{before} {ctx.time_left()}"

    item = Scheduled(
        call=ToolCall(id="1", name="timed", args={}), tool=timed, args={}, kwargs={}, reason="r"
    )
    ctx = ToolContext(session_id="s", tenant="t", agent="a", call_id="1")
    outcome = await execute(item, ctx, timeout=None, max_output=100)
    assert outcome.content == "5.0 3.5"


def test_bad_tool_definitions_are_configuration_errors():
    with pytest.raises(ConfigError, match="invalid tool name 'two words'"):
        tool(name="two words")(lambda: None)
    with pytest.raises(ConfigError, match=r"\*args/\*\*kwargs"):

        @tool
        def spread(*items: str) -> str:
            return ""


def test_return_values_become_text():
    assert to_content("plain") == "plain"
    assert to_content(None) == ""
    assert to_content({"a": [1, 2]}) == '{"a":[1,2]}'
    assert to_content(Address(city="Oslo")) == '{"city":"Oslo","zip":null}'
    assert to_content({1, 2}) in ("[1,2]", "[2,1]")
