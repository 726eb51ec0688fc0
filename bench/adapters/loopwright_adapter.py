"""loopwright adapter for the benchmark's four scenarios (bench/scenarios.py).

The interface of the peer harness's adapters: `VERSION` and four functions `long_loop(steps)`,
`wide_batch(n)`, `many_sessions(n)`, `streaming(n)`. Each builds its agent (not timed) and
returns a zero-argument async callable (timed). The fake model is loopwright's own
`FunctionModel`; every reply carries a fixed `usage`, so no token estimate is made per step.

Every option stays at its default except `max_turns` (default 25; A needs 501 model requests).
The tools of `scenarios.py` are wrapped with `@tool` unchanged, so their call counters count
every call: `ping` is sync and runs in a worker thread (loopwright's default for sync tools;
`loopwright_inline` runs it on the loop), `wait` is async.

Extra, loopwright-only: `step_profile(steps)` runs A and returns the `time.perf_counter()`
timestamp of every `step:started` (plus one at `done`), for the flatness check in bench/run.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

_BENCH = str(Path(__file__).resolve().parents[1])
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

import scenarios  # noqa: E402  (its CALLS counters are what the runner checks)
from scenarios import FINAL, PROMPT, TOKENS, next_ping  # noqa: E402

from loopwright import Agent, Session, tool  # noqa: E402
from loopwright import events as ev  # noqa: E402
from loopwright.messages import ToolCall, ToolResultMessage, Usage  # noqa: E402
from loopwright.testing import FunctionModel, Reply  # noqa: E402

try:
    VERSION = version("loopwright")
except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    VERSION = "dev"

USAGE = Usage(input_tokens=10, output_tokens=1)  # fixed usage: no per-step estimate
MAX_TURNS = 10_000  # the default (25) would stop A after 25 requests

# The scenario's functions themselves, unchanged: @tool only reads their signature and docstring.
ping_tool = tool(scenarios.ping)  # sync: runs in a worker thread (the default)
wait_tool = tool(scenarios.wait)  # async: awaits asyncio.sleep(WIDE_SLEEP)

_FINAL_REPLY = Reply(text=FINAL, usage=USAGE)


def last_tool_output(messages) -> str | None:
    """The content of the last message if it is a tool result (O(1), like the peers)."""
    last = messages[-1] if messages else None
    return last.content if type(last) is ToolResultMessage else None


def ping_agent(steps: int) -> Agent:
    def model(request):
        k = next_ping(last_tool_output(request.messages), steps)
        if k is None:
            return _FINAL_REPLY
        return Reply(tool_calls=(ToolCall(id=f"c{k}", name="ping", args={"i": k}),), usage=USAGE)

    return Agent(model=FunctionModel(model), tools=[ping_tool], max_turns=MAX_TURNS, name="bench")


async def _answer(agent: Agent) -> str:
    return (await Session(agent).run(PROMPT).result()).text


# ---- scenarios: each builds (untimed) and returns the async thunk that is timed


def long_loop(steps):
    agent = ping_agent(steps)
    return lambda: _answer(agent)


def wide_batch(n):
    calls = tuple(ToolCall(id=f"w{i}", name="wait", args={"i": i}) for i in range(n))

    def model(request):
        if last_tool_output(request.messages) is not None:
            return _FINAL_REPLY
        return Reply(tool_calls=calls, usage=USAGE)

    agent = Agent(model=FunctionModel(model), tools=[wait_tool], max_turns=MAX_TURNS, name="bench")
    return lambda: _answer(agent)


def many_sessions(n):
    agent = ping_agent(1)
    return lambda: asyncio.gather(*(_answer(agent) for _ in range(n)))


def streaming(n):
    reply = Reply(text="".join(TOKENS[:n]), chunk=4, usage=USAGE)  # n deltas of 4 characters
    agent = Agent(model=FunctionModel(lambda request: reply), max_turns=MAX_TURNS, name="bench")

    async def consume():
        deltas = []
        async for e in Session(agent).run(PROMPT):
            if type(e) is ev.TextDelta:
                deltas.append(e.delta)
        return deltas

    return consume


# ---- extra: per-step timestamps for A's flatness


def step_profile(steps):
    """Thunk running A with per-step timestamps; returns (final text, timestamps) where
    timestamps[k-1] is when `step:started` k was emitted and the last entry is when `done` was.

    The stamps are taken in a `Journal` (the session's store seam), which the run awaits for
    every event before the loop goes on, i.e. where the loop runs.
    """
    agent = ping_agent(steps)
    clock = time.perf_counter

    class Stamps:
        def __init__(self):
            self.stamps = []

        async def begin(self, session, input):
            pass

        async def end(self, session, stop_reason):
            pass

        def seq_of(self, event):
            return None

        async def append(self, session_id, event):
            t = type(event)
            if t is ev.StepStarted or t is ev.Done:
                self.stamps.append(clock())

    async def run():
        journal = Stamps()
        result = await Session(agent, journal=journal).run(PROMPT).result()
        return result.text, journal.stamps

    return run


def flatness(stamps, window=50):
    """Cost of the last `window` tool steps over steps 2..window+1 (step 1 pays one-off warm-up).

    With S tool steps there are S+1 `step:started` stamps (the last step is the final answer)
    plus the `done` stamp; step k lasts stamps[k] - stamps[k-1] (1-based k).
    """
    steps = len(stamps) - 2  # tool steps
    if steps < 2 * window + 1:
        raise ValueError(f"need at least {2 * window + 1} tool steps, got {steps}")
    first = stamps[window + 1] - stamps[1]  # steps 2..window+1
    last = stamps[steps] - stamps[steps - window]  # steps steps-window+1..steps
    return last / first


def long_loop_store(steps):
    """Scenario A with the SQLite event log: every committed event goes to a real database file
    (WAL, synchronous=NORMAL) in a fresh temporary directory, through `runtime.open_session`.
    The log and the session are made before the clock starts, as the other scenarios build their
    agents untimed; afterwards the thunk's `stored()` counts what was committed and `close()`
    closes the log."""
    import tempfile

    from loopwright.runtime import open_session
    from loopwright.store import SessionKey, open_log

    agent = ping_agent(steps)
    directory = tempfile.mkdtemp(prefix="loopwright-bench-")

    async def setup():
        log = await open_log(Path(directory) / "bench.db")
        return log, await open_session(agent, log, "bench")

    log, session = asyncio.run(setup())

    async def run():
        return (await session.run(PROMPT).result()).text

    def stored():
        return len(asyncio.run(log.read(SessionKey("default", agent.name, "bench"))))

    run.stored = stored
    run.close = lambda: asyncio.run(log.close())
    run.directory = directory
    return run
