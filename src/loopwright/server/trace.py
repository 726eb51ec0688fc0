"""`GET /agents/{name}/sessions/{id}/trace`: the session's steps as the playground's trace view
shows them — each step's duration, tokens and cost, and its tool calls with their durations.

Everything comes from the event log; nothing is stored for it. Times are the log's `at`: when
an event was committed. The journal commits in batches — a step's `step:started` with its model
reply, its `step:finished` with the next step's reply — so a step is timed by its other events:
from the last commit before it (the run's input, the previous step's last tool result) to the
commit of its last event before `step:finished`; the model request and the tool calls are inside
it. A tool call is timed from its `tool:started` (its intent, committed before it runs) to its
`tool:output`. A step or call that has not ended (a paused or interrupted run) has no
`finishedAt` and a null duration (a paused step resumed later counts the wait for the decision).
Tokens and cost are the step's replies' (`message:completed`); `cost` is null when no reply of
the step had a known price.

At most `MAX_STEPS` steps are answered (the latest); `omitted` counts the ones left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import events as ev
from ..messages import AssistantMessage
from ..store import StoredEvent
from .routes import session_record
from .state import state_of

MAX_STEPS = 1000
PAGE = 1000


async def show(request: Request) -> JSONResponse:
    state = state_of(request)
    key = (await session_record(state, request)).key
    stored: list[StoredEvent] = []
    while True:  # (a page at a time: the log's reads are bounded)
        page = await state.runtime.read(key, after=stored[-1].seq if stored else 0, limit=PAGE)
        stored += page
        if len(page) < PAGE:
            break
    return JSONResponse({"sessionId": key.id, **trace(stored)})


def trace(stored: Iterable[StoredEvent]) -> dict[str, Any]:
    """The steps of a session's stored events, oldest first, and their totals."""
    steps: list[dict[str, Any]] = []
    running: dict[int, dict[str, Any]] = {}  # step number → the step not finished yet
    calls: dict[str, dict[str, Any]] = {}  # call id → its latest call (ids may repeat per run)
    turn, before = 0, ""  # the inputs seen; the `at` of the last event (not `step:finished`)
    for item in stored:
        event = item.event
        if isinstance(event, ev.InputReceived):
            turn += 1
            running.clear()
        elif isinstance(event, ev.StepStarted):
            running[event.step] = _step(turn, event.step, before or item.at)
            steps.append(running[event.step])
        elif isinstance(event, ev.StepFinished):
            if event.step in running:  # (it may be committed with the next step: not its time)
                _finish(running.pop(event.step), before)
            continue
        elif isinstance(event, ev.MessageCompleted) and running:
            _count(steps[-1], event.message)
        elif isinstance(event, ev.ToolStarted) and running:
            calls[event.id] = _call(event.id, event.tool, item.at)
            steps[-1]["tools"].append(calls[event.id])
        elif isinstance(event, ev.ToolOutput) and event.id in calls:
            _finish(calls[event.id], item.at)
            calls[event.id]["isError"] = event.is_error
        elif isinstance(event, ev.ToolResult) and event.id in calls:
            calls[event.id]["status"] = event.status_text
        before = item.at
    shown = steps[-MAX_STEPS:]
    costs = [s["cost"] for s in steps if s["cost"] is not None]
    totals = {
        "steps": len(steps),
        "durationMs": sum(s["durationMs"] or 0 for s in steps),
        "inputTokens": sum(s["inputTokens"] for s in steps),
        "outputTokens": sum(s["outputTokens"] for s in steps),
        "cost": round(sum(costs), 8) if costs else None,
    }
    return {"steps": shown, "omitted": len(steps) - len(shown), "totals": totals}


def _step(turn: int, number: int, at: str) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": number,
        "startedAt": at,
        "finishedAt": None,
        "durationMs": None,
        "inputTokens": 0,
        "outputTokens": 0,
        "cost": None,
        "model": None,
        "tools": [],
    }


def _call(call_id: str, tool: str, at: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "tool": tool,
        "startedAt": at,
        "finishedAt": None,
        "durationMs": None,
        "status": None,
        "isError": False,
    }


def _finish(entry: dict[str, Any], at: str) -> None:
    if entry["finishedAt"] is None:
        entry["finishedAt"], entry["durationMs"] = at, _ms(entry["startedAt"], at)


def _count(step: dict[str, Any], message: AssistantMessage) -> None:
    step["model"] = message.model or step["model"]
    if message.usage is None:
        return
    step["inputTokens"] += message.usage.input_tokens
    step["outputTokens"] += message.usage.output_tokens
    if message.usage.cost is not None:
        step["cost"] = round((step["cost"] or 0.0) + message.usage.cost, 8)


def _ms(start: str, end: str) -> int:
    """Milliseconds between two of the log's times (never negative)."""
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return max(0, round(delta.total_seconds() * 1000))
