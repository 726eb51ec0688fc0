"""A session's recorded replies as a scripted model: the same run, offline, again."""

from __future__ import annotations

from conftest import call, run_agent, scripted
from loopwright import Agent, tool
from loopwright.events import MessageCompleted
from loopwright.models.recorded import recorded_model, recorded_script


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: one mug"


async def test_a_recorded_session_answers_again_with_the_same_replies():
    model = scripted(
        {
            "thinking": "look it up",
            "text": "Looking.",
            "tool_calls": [call("lookup", "c1", order_id="A-1")],
        },
        {"text": "One mug.", "usage": {"input_tokens": 7, "output_tokens": 3, "cost": 0.5}},
    )
    first = await run_agent(Agent(name="a", model=model, tools=[lookup]), "what did I buy?")
    script = recorded_script(first.events)
    assert script == [
        {
            "thinking": "look it up",
            "text": "Looking.",
            "tool_calls": [{"name": "lookup", "args": {"order_id": "A-1"}, "id": "c1"}],
            "usage": script[0]["usage"],
            "stop_reason": "tool_use",
        },
        {
            "text": "One mug.",
            "usage": {
                "input_tokens": 7,
                "output_tokens": 3,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "cost": 0.5,
            },
            "stop_reason": "end_turn",
        },
    ]
    again = await run_agent(
        Agent(name="a", model=recorded_model(first.events), tools=[lookup]), "what did I buy?"
    )
    replies = [e.message for e in again.events if isinstance(e, MessageCompleted)]
    originals = [e.message for e in first.events if isinstance(e, MessageCompleted)]
    assert [(m.parts, m.usage, m.stop_reason) for m in replies] == [
        (m.parts, m.usage, m.stop_reason) for m in originals
    ]
    assert again.text == "One mug."
