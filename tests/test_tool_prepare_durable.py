"""`prepare_arguments` in a durable session (a real SQLite log): the item a human is asked about
holds the prepared arguments, and a run resumed from the log — by another runtime, as after a
restart — runs the tool on them, prepared once (a prepare that is not idempotent shows it)."""

from __future__ import annotations

from typing import Any

from conftest import call, scripted
from loopwright import Agent, Approval, Rules, tool
from loopwright.store.log import SessionKey
from runtime_fixtures import *  # noqa: F403 (the fixtures: logs, runtimes)
from runtime_fixtures import ended

tagged: list[str] = []


def shout(args: dict[str, Any]) -> dict[str, Any]:
    return {"tag": args["tag"] + "!"}  # (deterministic, but not idempotent)


@tool(prepare_arguments=shout, label="Tag")
def tag(tag: str) -> str:
    """Tag it."""
    tagged.append(tag)
    return f"tagged {tag}"


RULES = Rules.from_yaml("rules: [{name: ask-tag, tool: tag, decision: ask}]")


async def test_a_paused_call_resumes_from_the_log_on_its_prepared_arguments(logs, runtimes):
    tagged.clear()
    model = scripted({"tool_calls": [call("tag", "t1", tag="x")]}, "tagged")
    agent = Agent(name="tagger", model=model, tools=[tag], rules=RULES)
    first = runtimes({"tagger": agent}, await logs())
    assert (await ended(await first.send("acme", "tagger", "s1", "go"))).stop_reason == "paused"
    [item] = await first.pending("acme")
    assert (item.tool, item.args) == ("tag", {"tag": "x!"})

    again = runtimes({"tagger": agent}, await logs())  # another runtime, on the same file
    resolved = await again.resolve("acme", item.id, Approval.approve(by="ann"))
    assert resolved.run is not None
    assert (await ended(resolved.run)).text == "tagged"
    assert tagged == ["x!"]
    session = await again.session(SessionKey("acme", "tagger", "s1"))
    assert session.status == "idle"
