"""A case's expectations checked against what its session's log holds: each one a `Check`
with a reason, passed or not.

What is read from the events: the tools the model called, with their arguments (every
`message:completed`'s calls, denied ones included), the gate's decisions (`ask` for a call
that waited on an approval, else its `actauth:decision`), and the stop reason and answer of the last `done`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import events as ev
from ..messages import ToolCall
from .dataset import Called, Expect


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation: what it asked (`check`), whether it held, and why."""

    check: str
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "passed": self.passed, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Happened:
    """What a case's session did, as the checks read it."""

    calls: tuple[ToolCall, ...]
    decisions: tuple[tuple[str, str], ...]
    stop_reason: str | None
    answer: str

    @classmethod
    def of(cls, events: Sequence[ev.Event]) -> Happened:
        calls = tuple(
            p
            for e in events
            if isinstance(e, ev.MessageCompleted)
            for p in e.message.parts
            if isinstance(p, ToolCall)
        )
        dones = [e for e in events if isinstance(e, ev.Done)]
        last = dones[-1] if dones else None
        stop = None if last is None else last.stop_reason
        return cls(calls, gate_decisions(events), stop, last.text if last else "")


def gate_decisions(events: Sequence[ev.Event]) -> tuple[tuple[str, str], ...]:
    """The gate's verdict on each call, in order: `ask` for a call that waited on an approval
    (its `actauth:decision` after it is the human's), else the `actauth:decision`'s."""
    found: list[tuple[str, str]] = []
    asked: dict[str, int] = {}
    for event in events:
        if isinstance(event, ev.ApprovalPending):
            found.append((event.tool, "ask"))
            asked[event.tool] = asked.get(event.tool, 0) + 1
        elif isinstance(event, ev.ActauthDecision):
            if asked.get(event.tool):
                asked[event.tool] -= 1
            else:
                found.append((event.tool, event.decision))
    return tuple(found)


def check(expect: Expect, outcome: Happened) -> list[Check]:
    """Every expectation of `expect` but the judge, in the order the keys are documented."""
    checks = [_called(c, outcome.calls) for c in expect.called]
    checks += [_not_called(tool, outcome.calls) for tool in expect.not_called]
    checks += [_decision(t, d, outcome.decisions) for t, d in expect.decisions.items()]
    if expect.stop_reason is not None:
        got = outcome.stop_reason
        checks.append(
            Check(f"stop_reason {expect.stop_reason}", got == expect.stop_reason, f"stopped: {got}")
        )
    answer = outcome.answer
    for text in expect.answer_contains:
        held = text in answer
        checks.append(Check(f"answer contains {text!r}", held, _shown(answer, "the answer", held)))
    if expect.answer_matches is not None:
        held = re.search(expect.answer_matches, answer) is not None
        checks.append(
            Check(
                f"answer matches {expect.answer_matches!r}",
                held,
                _shown(answer, "the answer", held),
            )
        )
    return checks


def _called(want: Called, calls: Sequence[ToolCall]) -> Check:
    name = want.tool if want.args is None else f"{want.tool} {_json(want.args)}"
    same = [c for c in calls if c.name == want.tool]
    if not same:
        return Check(f"called {name}", False, f"not called (called: {_names(calls)})")
    if want.args is None:
        return Check(f"called {name}", True, f"called {len(same)} time(s)")
    for call in same:
        if _holds(call.args, want.args):
            return Check(f"called {name}", True, f"called with {_json(call.args)}")
    seen = "; ".join(_json(c.args) for c in same)
    return Check(f"called {name}", False, f"called, but with other arguments: {seen}")


def _not_called(tool: str, calls: Sequence[ToolCall]) -> Check:
    count = sum(1 for c in calls if c.name == tool)
    return Check(
        f"not called {tool}", not count, f"called {count} time(s)" if count else "not called"
    )


def _decision(tool: str, want: str, decisions: Sequence[tuple[str, str]]) -> Check:
    got = [d for t, d in decisions if t == tool]
    if not got:
        return Check(f"decision {tool} {want}", False, f"{tool} was never decided")
    held = all(d == want for d in got)
    return Check(f"decision {tool} {want}", held, f"decided: {', '.join(got)}")


def _holds(args: Any, want: Any) -> bool:
    """Whether `args` holds `want`: every key of a mapping (recursively), else equal."""
    if isinstance(want, dict):
        return isinstance(args, dict) and all(
            k in args and _holds(args[k], v) for k, v in want.items()
        )
    return bool(args == want)


def _names(calls: Sequence[ToolCall]) -> str:
    return ", ".join(dict.fromkeys(c.name for c in calls)) or "none"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _shown(text: str, what: str, held: bool) -> str:
    flat = " ".join(text.split())
    flat = flat if len(flat) <= 120 else flat[:119] + "…"
    return f"{what} {'holds it' if held else 'does not'}: {flat!r}"
