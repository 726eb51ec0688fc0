"""What redaction (loopwright.redact, RELIABILITY P11) adds to serialising one event.

    .venv/bin/python bench/redact.py [--n 20000] [--rounds 5]

For each event, µs per call (median of the rounds, rounds interleaved):

- `raw dumps` / `dumps`: the JSON line the event log stores — pydantic's `dump_json` alone, then
  `wire.dumps` (the same, screened for secrets);
- `raw to_dict` / `to_dict`: the JSON object HTTP bodies, SSE and exports are made of — pydantic's
  `dump_python`, then `wire.to_dict` (the same, each string screened).

Two secrets are registered, as a server with a provider key and a bearer token has. The events
are what a run logs (from bench/log_append.py), a token delta, a 2 kB reply, a 20 kB tool output,
and an error that does hold a key (the slow path: decoded, redacted, encoded again).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's first
sys.path.insert(0, str(Path(__file__).resolve().parent))

from log_append import FIVE, ONE

from loopwright import events as ev
from loopwright import redact, wire
from loopwright.messages import AssistantMessage, Text, Usage

KEY = "sk-proj-0123456789abcdefghijklmnopqrstuv"
redact.register(KEY, "a-long-random-bearer-token-0001")
PROSE = "The refund for order A-1001 was issued; it reaches the card in 3-5 business days. "
EVENTS: list[tuple[str, ev.Event]] = [(e.type, e) for e in ONE + FIVE]
EVENTS += [
    ("text:delta", ev.TextDelta(delta="the ")),
    (
        "message:completed 2 kB",
        ev.MessageCompleted(
            message=AssistantMessage(
                parts=(Text(text=(PROSE * 25)[:2000]),),
                usage=Usage(input_tokens=9, output_tokens=9),
            )
        ),
    ),
    (
        "tool:output 20 kB",
        ev.ToolOutput(
            id="c1", tool="read_file", content=("def f(x):\n    return x\n" * 900)[:20000]
        ),
    ),
    ("loop:error with a key", ev.LoopError(error=f"HTTP 401: Incorrect API key provided: {KEY}")),
]


def per_call(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def measure(event: ev.Event, n: int, rounds: int) -> dict[str, float]:
    adapter = wire._adapter(type(event))
    ways: dict[str, Callable[[], Any]] = {
        "raw dumps": lambda: adapter.dump_json(event, by_alias=True, exclude_none=True).decode(),
        "dumps": lambda: wire.dumps(event),
        "raw to_dict": lambda: adapter.dump_python(
            event, mode="json", by_alias=True, exclude_none=True
        ),
        "to_dict": lambda: wire.to_dict(event),
    }
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, fn in ways.items():
            times[way].append(per_call(fn, n))
    return {way: statistics.median(t) for way, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for name, event in EVENTS:
        n = max(200, args.n // (1 + len(wire.dumps(event)) // 500))
        rows.append((name, measure(event, n, args.rounds)))
    print(
        f"{'event':<24} {'raw dumps':>10} {'dumps':>8} {'+':>6} "
        f"{'raw dict':>9} {'to_dict':>8} {'+':>6}"
    )
    for name, t in rows:
        print(
            f"{name:<24} {t['raw dumps']:>10.2f} {t['dumps']:>8.2f} "
            f"{t['dumps'] - t['raw dumps']:>6.2f} {t['raw to_dict']:>9.2f} {t['to_dict']:>8.2f} "
            f"{t['to_dict'] - t['raw to_dict']:>6.2f}"
        )
    print("(µs per call; + is what redaction adds)")


if __name__ == "__main__":
    main()
