"""The four scenarios' constants, their two tools and the check run after each scenario.

The parameters are those of the shared peer harness (the peers' `common.py`), so our figures
and the peers' stay comparable; this module lets the repo run floor and loopwright alone.
The tools count their own calls in `CALLS`: an adapter never touches the counters, so a run
that skipped a call fails its check.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

LONG_STEPS = 500  # A: one `ping` call per step, then the final answer
WIDE_CALLS = 50  # B: `wait` calls asked for in a single model turn
WIDE_SLEEP = 0.05  # B: seconds each `wait` awaits
SESSIONS = 200  # C: independent runs started together, one `ping` each
STREAM_DELTAS = 2000  # D: text deltas of one streamed answer

PROMPT = "go"
FINAL = "done"
TOKENS = [f"{n % 1000:03d} " for n in range(STREAM_DELTAS)]  # D: four characters each

# scenario -> the argument its adapter function takes
ARGS = {
    "long_loop": LONG_STEPS,
    "wide_batch": WIDE_CALLS,
    "many_sessions": SESSIONS,
    "streaming": STREAM_DELTAS,
}
UNITS = {"long_loop": LONG_STEPS, "streaming": STREAM_DELTAS}  # µs per step / per delta

CALLS = {"ping": 0, "wait": 0}


def ping(i: int) -> str:
    """Trivial sync tool: return a short string."""
    CALLS["ping"] += 1
    return f"pong {i}"


async def wait(i: int) -> str:
    """Async tool that awaits WIDE_SLEEP seconds."""
    await asyncio.sleep(WIDE_SLEEP)
    CALLS["wait"] += 1
    return f"waited {i}"


_WAIT_LOCK = threading.Lock()


def wait_blocking(i: int) -> str:
    """`wait` for a framework whose tools are sync only (smolagents, in bench/peers/): blocks its
    thread for WIDE_SLEEP seconds; the tools run in a pool, so the counter takes a lock."""
    time.sleep(WIDE_SLEEP)
    with _WAIT_LOCK:
        CALLS["wait"] += 1
    return f"waited {i}"


def next_ping(last_tool_output: str | None, steps: int) -> int | None:
    """The fake model's policy in A and C, from the last tool output alone (no state, so one
    agent serves concurrent runs): the next `ping` argument, or None to answer FINAL."""
    if last_tool_output is None:
        return 0 if steps > 0 else None
    following = int(last_tool_output.rpartition(" ")[2]) + 1
    return following if following < steps else None


def check(scenario: str, out: object) -> tuple[bool, int]:
    """Whether a scenario's output and the call counters show all its work was done, and the
    count that was checked (calls, or deltas for D)."""
    if scenario == "long_loop":
        return out == FINAL and CALLS["ping"] == LONG_STEPS, CALLS["ping"]
    if scenario == "wide_batch":
        return out == FINAL and CALLS["wait"] == WIDE_CALLS, CALLS["wait"]
    if scenario == "many_sessions":
        texts = list(out) if isinstance(out, Sequence) else []
        return texts == [FINAL] * SESSIONS and CALLS["ping"] == SESSIONS, CALLS["ping"]
    if scenario == "streaming":
        deltas = list(out) if isinstance(out, Sequence) else []
        return len(deltas) == STREAM_DELTAS and "".join(deltas) == "".join(TOKENS), len(deltas)
    raise ValueError(f"unknown scenario {scenario!r}")
