"""The optional LLM judge: a model reads a rubric, the case's input and the agent's answer, and
replies with a verdict, PASS or FAIL, and why. Any model string works; offline, a scripted one.

The verdict is the first word PASS or FAIL in the reply (either case); the rest of the reply
is the reason. A reply with no verdict, or a judge whose run fails, fails the check and says so.
"""

from __future__ import annotations

import re

from ..agent import Agent
from ..errors import ConfigError
from .dataset import Judge
from .expectations import Check

INSTRUCTIONS = (
    "You grade an AI agent's answer against a rubric. Reply with PASS or FAIL on the first "
    "line, then one or two sentences saying why."
)
VERDICT = re.compile(r"\b(PASS|FAIL)\b[\s:.\-—]*", re.IGNORECASE)


def prompt(judge: Judge, question: str, answer: str) -> str:
    return (
        f"Rubric:\n{judge.rubric}\n\nThe user wrote:\n{question}\n\nThe agent answered:\n{answer}"
    )


async def verdict(judge: Judge, question: str, answer: str) -> Check:
    """The judge's check on `answer` (never raises for what the judge says or fails to say)."""
    from ..loop.session import run

    name = f"judge {judge.given or judge.model}"
    agent = Agent(name="judge", model=judge.model, instructions=INSTRUCTIONS)
    try:
        result = await run(agent, prompt(judge, question, answer))
    except ConfigError as exc:
        return Check(name, False, f"the judge could not run: {exc}")
    if result.stop_reason != "completed":
        return Check(name, False, f"the judge's run ended {result.stop_reason}: {result.text}")
    return parse(name, result.text)


def parse(name: str, reply: str) -> Check:
    found = VERDICT.search(reply)
    if found is None:
        flat = " ".join(reply.split())
        return Check(name, False, f"the judge's reply holds no verdict (PASS or FAIL): {flat!r}")
    reason = " ".join(reply[found.end() :].split()) or "(no reason given)"
    return Check(name, found.group(1).upper() == "PASS", reason)
